"""Hostile targets (issue #17): stacks whose names, depth and chains the target controls.

``huge_names.py`` parks 4 threads 150 frames deep in a function whose name, qualified name
and file name are each 1 MB. Both readers (diag's own and py-spy) keep 4 KiB of a name and
say so in a failure record; diag's RSS and its outputs stay small.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import pytest
from conftest import DIAG, PROGRAMS

from diag.probes import stacks as stacks_probe
from diag.probes.pyspy_dump import (
    FRAMES_CUT,
    MAX_FRAMES,
    MAX_NAME_CHARS,
    TRUNCATED,
    PyThreadDump,
    parse_pyspy_json,
    truncation_of,
)
from diag.probes.stacks import find_pyspy, read_python_stacks

HUGE = [sys.executable, str(PROGRAMS / "huge_names.py")]


def _check_capped(dumps: List[PyThreadDump]) -> None:
    deep = [d for d in dumps if len(d.frames) >= 150]
    assert len(deep) == 4, [len(d.frames) for d in dumps]
    for dump in deep:
        for frame in dump.frames:
            assert len(frame.name) <= MAX_NAME_CHARS + len(TRUNCATED)
            assert len(frame.filename) <= MAX_NAME_CHARS + len(TRUNCATED)
        assert any(f.name.endswith(TRUNCATED) for f in dump.frames)
    note = truncation_of(dumps)
    assert note is not None and note.startswith("truncated:") and "4096" in note


@pytest.mark.parametrize("reader", ["auto", "py-spy"])
def test_both_readers_cap_a_1mb_name(spawn: Any, reader: str) -> None:
    pyspy = find_pyspy()
    if pyspy is None:
        pytest.skip("py-spy not installed")
    job = spawn(HUGE)
    dumps, used = read_python_stacks(job.pid, 20.0, pyspy, reader=reader)
    assert used == ("diag" if reader == "auto" and sys.version_info >= (3, 11) else "py-spy")
    if used == "diag":
        _check_capped(dumps)
    else:  # py-spy 0.4 leaves out frames whose names it cannot read: whatever it gives is capped
        for dump in dumps:
            assert all(len(f.name) <= MAX_NAME_CHARS + len(TRUNCATED) for f in dump.frames)


def test_capture_of_huge_names_keeps_rss_and_outputs_small(spawn: Any, tmp_path: Path) -> None:
    job = spawn(HUGE)
    out = tmp_path / "huge"
    # A fresh parent measures diag alone: this test process's RUSAGE_CHILDREN already holds
    # the peak of every child an earlier test ran (a torch job, a vLLM server).
    measure = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
        "print('PEAK_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
        "sys.exit(r.returncode)"
    )
    argv = [*DIAG, "capture", "--pid", str(job.pid), "--count", "1", "-o", str(out)]
    result = subprocess.run(
        [sys.executable, "-c", measure, *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    peak_mb = int(result.stdout.rsplit("PEAK_KB", 1)[1].split()[0]) / 1024
    assert peak_mb < 300, peak_mb  # diag (or a worker) never held 150 MB
    for ext in (".json", ".html", ".md"):
        assert (tmp_path / f"huge{ext}").stat().st_size < 8 << 20, ext
    bundle = json.loads((tmp_path / "huge.json").read_text())
    reasons = [f["reason"] for s in bundle["samples"] for f in s.get("failures", [])]
    assert any(r.startswith("truncated:") and "name" in r for r in reasons), reasons


def test_pyspy_json_is_capped_in_frames_and_names() -> None:
    frames = [{"name": "n" * 10_000, "filename": "f.py", "line": i} for i in range(2000)]
    text = json.dumps([{"thread_id": 1, "os_thread_id": 7, "frames": frames}])
    (dump,) = parse_pyspy_json(text)
    assert len(dump.frames) == MAX_FRAMES + 1 and dump.frames[-1].name == FRAMES_CUT
    assert dump.frames[0].name == "n" * MAX_NAME_CHARS + TRUNCATED
    note = truncation_of([dump])
    assert note is not None and f"deeper than {MAX_FRAMES} frames" in note


def test_pyspy_output_is_read_up_to_a_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A py-spy that prints without end (here a stand-in script) is killed at the byte budget."""
    fake = tmp_path / "py-spy"
    fake.write_text("#!/bin/sh\nexec cat /dev/zero\n")
    fake.chmod(0o755)
    monkeypatch.setattr(stacks_probe, "MAX_PYSPY_OUTPUT_BYTES", 1 << 20)
    with pytest.raises(stacks_probe.StackError, match="truncated: py-spy printed over"):
        stacks_probe._run_pyspy(str(fake), os.getpid(), True, 20.0)


def test_pyspy_dies_with_diag(tmp_path: Path) -> None:
    """py-spy (here a stand-in that sleeps) gets SIGKILL when the diag that started it dies."""
    fake = tmp_path / "py-spy"
    pidfile = tmp_path / "pid"
    fake.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    fake.chmod(0o755)
    code = (
        "import sys; from diag.probes import stacks\n"
        f"stacks._run_pyspy({str(fake)!r}, 1, True, 60.0)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not pidfile.exists():
        time.sleep(0.05)
    time.sleep(0.2)
    child = int(pidfile.read_text())
    parent.kill()
    parent.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                break
        except (ProcessLookupError, FileNotFoundError):
            break
        time.sleep(0.05)
    else:
        os.kill(child, 9)
        pytest.fail("py-spy outlived diag")


def test_a_cyclic_frame_chain_is_a_recorded_failure_not_not_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from diag.probes.cpython.pyframes import FrameChainCorrupt

    def looping(*_args: object, **_kw: object) -> None:
        raise FrameChainCorrupt("frame chain cyclic/corrupt (loops or never ends)")

    monkeypatch.setattr(stacks_probe, "read_stacks", looping)
    with pytest.raises(stacks_probe.StackError) as err:
        read_python_stacks(os.getpid(), 5.0, "/nonexistent/py-spy")
    assert err.value.kind == stacks_probe.KIND_ERROR
    assert "cyclic/corrupt" in str(err.value) and "not a Python" not in str(err.value)
