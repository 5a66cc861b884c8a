"""The job outlives every failure of diag (issue #25): a write that fails, a directory that
vanishes, a renderer that crashes - the launched job runs to its end unharmed, its output is
still copied, and diag exits with the documented code.

The matrix injects the OSError at diag's write function (``tests/programs/faulty_diag.py``)
for each write point; the real-filesystem cases use a tiny tmpfs (ENOSPC, root only) and an
immutable directory (``chattr +i``: EPERM, root only)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from conftest import DIAG, PROGRAMS, in_mount_namespace

from diag.bundle.io import load_bundle
from diag.errors import EXIT_DISK_FULL, EXIT_INTERNAL, EXIT_OUTPUT

ROOT = os.geteuid() == 0
FAULTY = [sys.executable, str(PROGRAMS / "faulty_diag.py")]
TICKS = 12
# The job: one line every 0.1 s, then a marker only a job that ran to its end writes.
JOB = (
    "import sys, time\n"
    f"for i in range({TICKS}):\n"
    "    print('tick', i, flush=True)\n"
    "    time.sleep(0.1)\n"
    "open(sys.argv[1], 'w').write('done')\n"
)
EXPECTED = {"ENOSPC": EXIT_DISK_FULL, "EROFS": EXIT_OUTPUT, "EIO": EXIT_OUTPUT}


def _watch_args(out: Path, marker: Path, job: str = JOB) -> List[str]:
    return [
        "watch",
        "--interval",
        "0.2",
        "--count",
        "3",
        "-o",
        str(out),
        "--",
        sys.executable,
        "-c",
        job,
        str(marker),
    ]


def _run(argv: List[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def _retry_notes(stderr: str) -> List[str]:
    return [line for line in stderr.splitlines() if "keeps running" in line]


@pytest.mark.parametrize("code", ["ENOSPC", "EROFS", "EIO"])
@pytest.mark.parametrize("point", ["journal", "journal-close", "json", "html", "md", "log"])
def test_a_failing_write_never_harms_the_launched_job(
    tmp_path: Path, point: str, code: str
) -> None:
    out, marker = tmp_path / "run", tmp_path / "marker"
    result = _run([*FAULTY, point, code, "-1", "--", *_watch_args(out, marker)])
    assert marker.read_text() == "done", result.stderr  # ran to its end: never signalled
    assert "command: exit code 0" in result.stderr
    assert result.returncode == EXPECTED[code], result.stderr
    assert "internal error" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("diag: cannot ") and os.strerror(getattr(errno, code)) in last, last
    assert f"tick {TICKS - 1}" in result.stdout  # the terminal got all of it
    if point == "log":  # PATH.log lost lines: the raw spool is kept for the user
        assert f"tick {TICKS - 1}" in (tmp_path / ".run.log.stdout").read_text()
        assert "run.log.stdout" in result.stderr
    else:
        assert f"tick {TICKS - 1}" in (tmp_path / "run.log").read_text()
        assert not (tmp_path / ".run.log.stdout").exists()
    if point != "journal-close":  # a failure during the watch is told once, with the remedy
        assert len(_retry_notes(result.stderr)) == 1, result.stderr
    if point in ("json", "html", "md", "log"):
        assert load_bundle(tmp_path / "run.jsonl").complete  # the other outputs were written


def test_a_transient_full_disk_in_the_journal_is_retried_and_exits_11(
    spawn: object, tmp_path: Path
) -> None:
    job = spawn([sys.executable, str(PROGRAMS / "exit_soon.py"), "60"])  # type: ignore[operator]
    out = tmp_path / "w"
    args = ["watch", "--pid", str(job.pid), "--interval", "0.2", "--count", "4", "-o", str(out)]
    result = _run([*FAULTY, "journal", "ENOSPC", "1", "--", *args])
    assert result.returncode == EXIT_DISK_FULL, result.stderr
    assert "internal error" not in result.stderr
    bundle = load_bundle(tmp_path / "w.jsonl")  # the line that failed was written on retry
    assert bundle.complete and len(bundle.samples) == 4
    assert job.proc.poll() is None  # type: ignore[attr-defined]


def test_a_render_crash_is_recorded_and_the_job_runs_on(tmp_path: Path) -> None:
    out, marker = tmp_path / "run", tmp_path / "marker"
    result = _run([*FAULTY, "render", "EIO", "-1", "--", *_watch_args(out, marker)])
    assert marker.read_text() == "done", result.stderr
    assert "command: exit code 0" in result.stderr
    assert result.returncode == EXIT_INTERNAL, result.stderr
    assert "a bug in the renderer" in result.stderr.strip().splitlines()[-1]
    assert load_bundle(tmp_path / "run.jsonl").complete
    assert (tmp_path / "run.json").exists()


def test_an_output_dir_that_vanishes_mid_watch_leaves_the_job_running(tmp_path: Path) -> None:
    outdir, marker = tmp_path / "out", tmp_path / "marker"
    outdir.mkdir()
    job = JOB.replace(
        "    time.sleep(0.1)\n",
        "    time.sleep(0.1)\n"
        "    while i == 3 and os.path.exists(OUT): shutil.rmtree(OUT, ignore_errors=True)\n",
    ).replace("import sys, time\n", f"import os, shutil, sys, time\nOUT = {str(outdir)!r}\n")
    result = _run([*DIAG, *_watch_args(outdir / "run", marker, job)])
    assert marker.read_text() == "done", result.stderr
    assert result.returncode == EXIT_OUTPUT, result.stderr
    assert "internal error" not in result.stderr
    assert f"tick {TICKS - 1}" in result.stdout


def test_a_real_disk_that_fills_for_a_second_harms_neither_job_nor_outputs(
    tmp_path: Path,
) -> None:
    mnt, marker = tmp_path / "small", tmp_path / "marker"
    mnt.mkdir()
    # The job writes to the tmpfs too (its spool): it stays silent while the disk is full.
    job = "import sys, time\nprint('start', flush=True)\ntime.sleep(4)\nprint('end', flush=True)\n"
    job += "open(sys.argv[1], 'w').write('done')\n"
    script = (
        f"mount -t tmpfs -o size=4m tmpfs {mnt} || exit 99\n"
        f"{' '.join(DIAG)} watch --interval 0.2 --duration 3.5 -o {mnt}/run -- "
        f'{sys.executable} -c "{job}" {marker} 2>{mnt.parent}/err &\n'
        "sleep 1.5\n"
        f"dd if=/dev/zero of={mnt}/filler bs=64k 2>/dev/null\n"
        "sleep 1\n"
        f"rm {mnt}/filler\n"
        "wait $!\necho rc=$?\n"
        f"cat {mnt}/run.log\n"
    )
    result = in_mount_namespace(script)
    stderr = (tmp_path / "err").read_text()
    assert marker.read_text() == "done", stderr
    assert f"rc={EXIT_DISK_FULL}" in result.stdout, result.stdout + stderr
    assert "start" in result.stdout and "end" in result.stdout.split("rc=")[1]  # all in PATH.log
    assert len(_retry_notes(stderr)) == 1, stderr


def test_an_immutable_output_dir_is_told_once_and_exits_6(tmp_path: Path) -> None:
    if not ROOT or shutil.which("chattr") is None:
        pytest.skip("needs root and chattr")
    outdir, marker = tmp_path / "out", tmp_path / "marker"
    outdir.mkdir()
    job = JOB.replace(
        "    time.sleep(0.1)\n",
        "    time.sleep(0.1)\n"
        f"    if i == 3: __import__('subprocess').run(['chattr', '+i', {str(outdir)!r}])\n",
    )
    try:
        result = _run([*DIAG, *_watch_args(outdir / "run", marker, job)])
    finally:
        subprocess.run(["chattr", "-i", str(outdir)], check=False)
    assert marker.read_text() == "done", result.stderr
    assert result.returncode == EXIT_OUTPUT, result.stderr
    assert os.strerror(errno.EPERM) in result.stderr.strip().splitlines()[-1]
    assert "internal error" not in result.stderr
