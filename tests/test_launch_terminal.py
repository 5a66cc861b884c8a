"""Launch mode when diag's terminal goes away: the job outlives its observer (issue #32).

``diag watch -- CMD`` runs on a real pseudo-terminal that is diag's controlling terminal (diag
is its session leader), or with its stdout a pipe; the job prints a numbered line every
0.3 s. Mid-job the terminal hangs up - the pty's master is closed, so the kernel itself sends
diag SIGHUP, as when an ssh session drops - or the pipe's reader goes away. Then: the job runs
to its end (it is not killed or hung up on), diag stays until it ends and exits 0, and the
launch log holds every line the job printed, in order, the last ones too.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import List

import pytest
from conftest import DIAG, REPO

pytestmark = pytest.mark.slow

LINES = 20
JOB = (
    "import os, time\n"
    "print(f'job pid {os.getpid()}', flush=True)\n"
    f"for i in range({LINES}):\n"
    "    print(f'job line {i}', flush=True)\n"
    "    time.sleep(0.3)\n"
    "print('job done', flush=True)\n"
)


def _argv(out: Path) -> List[str]:
    return [*DIAG, "watch", "--interval", "0.5", "-o", str(out), "--", sys.executable, "-c", JOB]


def _read_until(fd: int, text: bytes, timeout_s: float = 60.0) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout_s
    while text not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{text!r} never came: {seen[-2000:]!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, f"closed before {text!r}: {seen[-2000:]!r}"
            seen += chunk
    return seen


def _job_pid(seen: bytes) -> int:
    line = next(ln for ln in seen.decode(errors="replace").splitlines() if "job pid " in ln)
    return int(line.rsplit(" ", 1)[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _assert_whole_log(out: Path) -> None:
    log = out.with_suffix(".log").read_text().splitlines()
    expected = [f"job line {i}" for i in range(LINES)] + ["job done"]
    assert [ln for ln in log if ln.startswith("job ")][1:] == expected, log
    bundle = json.loads(out.with_suffix(".json").read_text())
    assert bundle["verdict"]["exit_code"] == 0, bundle["verdict"]  # ended by itself, code 0


def _controlling_tty() -> None:
    """In diag, before exec: a session of its own whose controlling terminal is its stdin."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_terminal_hangup_keeps_the_job_and_its_whole_log(tmp_path: Path) -> None:
    out = tmp_path / "w"
    master, slave = pty.openpty()
    diag = subprocess.Popen(
        _argv(out),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        preexec_fn=_controlling_tty,
        cwd=REPO,
    )
    os.close(slave)
    try:
        seen = _read_until(master, b"job line 2")
        job = _job_pid(seen)
    finally:
        os.close(master)  # the terminal hangs up: the kernel sends diag SIGHUP
    time.sleep(1.0)
    assert _alive(job), "the job died with diag's terminal"
    assert diag.poll() is None, "diag left before the job ended: its last lines are lost"
    assert diag.wait(timeout=120) == 0
    assert not _alive(job)
    _assert_whole_log(out)


def test_stdout_pipe_closed_keeps_the_job_and_its_whole_log(tmp_path: Path) -> None:
    out = tmp_path / "w"
    diag = subprocess.Popen(_argv(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    assert diag.stdout is not None and diag.stderr is not None
    seen = _read_until(diag.stdout.fileno(), b"job line 2")
    job = _job_pid(seen)
    diag.stdout.close()  # the reader goes away: diag's next write meets EPIPE
    diag.stderr.close()
    time.sleep(1.0)
    assert _alive(job)
    assert diag.wait(timeout=120) == 0
    _assert_whole_log(out)
