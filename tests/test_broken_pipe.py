"""A stdout (or stderr) whose reader went away ends diag quietly with exit 0, like ``ls | head``.

``diag ps | head -1`` and ``diag capture ... | head -1`` exited 1 (click's answer to EPIPE), and
the interpreter's last flush could print "Exception ignored ... BrokenPipeError". Each test runs
diag through a real bash pipeline and reads diag's own exit status (``PIPESTATUS[0]``, with
``set -o pipefail``). ``head -1`` races with diag's later writes, so each command is also run
after its reader is already gone (``(sleep 2; exec diag ...) | true``): then the first write
meets the closed pipe for certain.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Tuple

import pytest
from conftest import DIAG, PROGRAMS, REPO

from diag.errors import EXIT_BAD_BUNDLE

pytestmark = pytest.mark.slow


def _pipeline(args: List[str], reader: str, cwd: Path, delay_s: float = 0.0) -> Tuple[int, str]:
    """diag's own exit status and its stderr, run as ``diag ARGS | READER`` in bash."""
    diag = " ".join(shlex.quote(a) for a in (*DIAG, *args))
    left = f"(sleep {delay_s}; exec {diag})" if delay_s else diag
    err = cwd / "stderr.txt"
    script = (
        f"set -o pipefail; {left} 2>{shlex.quote(str(err))} | {reader} >/dev/null; "
        'echo "diag=${PIPESTATUS[0]}"'
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=180, cwd=cwd, env=env
    )
    status = [ln for ln in done.stdout.splitlines() if ln.startswith("diag=")]
    assert status, done.stdout + done.stderr
    return int(status[-1].split("=", 1)[1]), err.read_text()


def _quiet(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert "Exception ignored" not in stderr, stderr
    assert "BrokenPipe" not in stderr and "Broken pipe" not in stderr, stderr
    assert "internal error" not in stderr, stderr


@pytest.fixture
def job(spawn: Any) -> Any:
    return spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "2"])


BUNDLE = str(REPO / "tests" / "golden" / "bundles" / "fr_lag_4ranks.json")


@pytest.mark.parametrize("reader", ["head -1", "true"])
@pytest.mark.parametrize(
    "args",
    [
        ["ps", "--no-gpu"],
        ["ps", "--no-gpu", "--json"],
        ["--help"],
        ["summary", BUNDLE],
        ["summary", "--json", BUNDLE],
    ],
)
def test_ps_summary_and_help_into_a_closed_pipe_exit_0(
    job: Any, tmp_path: Path, args: List[str], reader: str
) -> None:
    code, stderr = _pipeline(args, reader, tmp_path, delay_s=2.0 if reader == "true" else 0.0)
    assert code == 0, stderr
    _quiet(stderr)


@pytest.mark.parametrize("reader", ["head -1", "true"])
@pytest.mark.parametrize("as_json", [False, True])
def test_capture_into_a_closed_pipe_exits_0_with_its_files(
    job: Any, tmp_path: Path, reader: str, as_json: bool
) -> None:
    out = tmp_path / "cap"
    args = ["capture", "--pid", str(job.pid), "--count", "2", "--interval", "0.2", "-o", str(out)]
    delay = 2.0 if reader == "true" else 0.0
    code, stderr = _pipeline([*args, *(["--json"] if as_json else [])], reader, tmp_path, delay)
    assert code == 0, stderr
    _quiet(stderr)
    # What a capture writes to files comes before what it tells on stdout: all there.
    for ext in (".json", ".html", ".md"):
        assert (tmp_path / f"cap{ext}").stat().st_size > 0


def test_stdout_and_stderr_both_closed(job: Any, tmp_path: Path) -> None:
    """``2>&1 | true``: the error and status lines meet the closed pipe as well."""
    diag = " ".join(shlex.quote(a) for a in (*DIAG, "ps", "--no-gpu"))
    bad = " ".join(shlex.quote(a) for a in (*DIAG, "report", str(tmp_path / "missing.json")))
    script = (
        f"set -o pipefail; (sleep 2; exec {diag}) 2>&1 | true; a=${{PIPESTATUS[0]}}; "
        f"(sleep 2; exec {bad}) 2>&1 | true; echo diag=$a,${{PIPESTATUS[0]}}"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env
    )
    # A listing cut short is a success; an error that could not be told is still an error:
    # its line is lost, its exit code (8, not a bundle) stands.
    assert f"diag=0,{EXIT_BAD_BUNDLE}" in done.stdout, done.stdout + done.stderr
    _quiet(done.stderr)


def test_the_part_that_fit_was_written(job: Any, tmp_path: Path) -> None:
    """``diag ps | head -1``: the first line is the listing's, whole."""
    diag = " ".join(shlex.quote(a) for a in (*DIAG, "ps", "--no-gpu"))
    script = f"set -o pipefail; {diag} | head -1; echo diag=${{PIPESTATUS[0]}}"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=180, cwd=tmp_path, env=env
    )
    lines = done.stdout.splitlines()
    assert lines[-1] == "diag=0", done.stdout + done.stderr
    assert len(lines) == 2 and lines[0].split()[0].isdigit(), lines
    _quiet(done.stderr)
