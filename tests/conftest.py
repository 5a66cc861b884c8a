"""Shared fixtures: start real programs with a readiness handshake, run the real CLI.

A program under test prints a line containing ``READY`` to stdout once it has reached the state
the test wants to observe (threads blocked, server listening, ranks in their barrier). The test
waits for that line instead of sleeping, then inspects the live process.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import pytest

from bench.job import ProcessGroup

# A real-process test (marked ``slow``) that fails runs once more, two seconds later: on a
# loaded host a real program can leave the state it announced (READY) before the capture's
# samples land, or a verdict can sit on a threshold for one capture. Each such rerun is listed
# in the run's summary (``-rR``), so a test that needs it stays visible; one that fails twice
# fails the run. Fast tests read recordings and never rerun.
REAL_PROCESS_RERUNS = 1


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("rerunfailures"):
        return
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("flaky"):
            item.add_marker(pytest.mark.flaky(reruns=REAL_PROCESS_RERUNS, reruns_delay=2))


# Started in the background by a shell without job control (`make test &`, nohup), the suite
# inherits SIGINT ignored - and so would every program it starts, and Python then installs no
# KeyboardInterrupt handler. The tests of Ctrl-C (diag's own, a launched job's) need it
# delivered: a handler here becomes the default again in each child at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "programs"
SCENARIOS = REPO / "samples" / "scenarios"
DIAG = [sys.executable, "-m", "diag"]


class Started(ProcessGroup):
    """A program started in its own process group; ``lines`` holds what it printed up to READY."""

    def __init__(self, proc: subprocess.Popen[str], lines: List[str]) -> None:
        super().__init__(proc)
        self.lines = lines


def start_ready(
    argv: Sequence[str],
    timeout_s: float = 60.0,
    env: Optional[Dict[str, str]] = None,
    cwd: Optional[Path] = None,
) -> Started:
    """Start ``argv`` in a new session and block until it prints READY (or fail the test)."""
    full_env = dict(os.environ)
    full_env["PYTHONUNBUFFERED"] = "1"
    if env:
        full_env.update(env)
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=full_env,
        cwd=str(cwd) if cwd else None,
        start_new_session=True,
    )
    started = Started(proc, [])
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), True)
    # readline cannot time out, and a program whose children still hold its stdout never
    # gives EOF: at the deadline the whole group is killed, which closes the pipe.
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout_s, expire)
    timer.daemon = True
    timer.start()
    try:
        for line in iter(proc.stdout.readline, ""):
            started.lines.append(line)
            if "READY" in line:
                return started
    finally:
        timer.cancel()
    started.stop()
    why = f"not READY within {timeout_s}s" if expired.is_set() else "exited before READY"
    pytest.fail(f"{argv} {why}: {''.join(started.lines)[-2000:]}")


@pytest.fixture
def spawn() -> Iterator[object]:
    """``spawn(argv, ...)`` starts a program and waits for READY; all are killed at teardown."""
    started: List[Started] = []

    def _spawn(argv: Sequence[str], **kwargs: object) -> Started:
        s = start_ready(argv, **kwargs)  # type: ignore[arg-type]
        started.append(s)
        return s

    yield _spawn
    for s in started:
        s.stop()


def run_diag(
    args: Sequence[str],
    timeout_s: float = 120.0,
    cwd: Optional[Path] = None,
    env: Optional[Dict[str, str]] = None,
    wrapper: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess, as a user would (``wrapper``: e.g. setpriv ...)."""
    return subprocess.run(
        [*wrapper, *DIAG, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=str(cwd) if cwd else None,
        env=env,
    )


def in_mount_namespace(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with sh in a private mount namespace, where it may mount a small tmpfs
    (and exit 99 when it cannot); skips without root and unshare, or when the mount fails."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to mount a small tmpfs")
    result = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode == 99:
        pytest.skip("cannot mount tmpfs here")
    return result


FAKE_NVML = REPO / "tests" / "fake_nvml"


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Select the fake NVML binding for every NVML worker started from this test: the fake
    ``pynvml`` first on PYTHONPATH, its placeholder ``libnvidia-ml.so.1`` on LD_LIBRARY_PATH
    (the driver trace diag checks before it starts a worker at all)."""
    for var, path in (("PYTHONPATH", FAKE_NVML), ("LD_LIBRARY_PATH", FAKE_NVML / "lib")):
        monkeypatch.setenv(var, os.pathsep.join([str(path), os.environ.get(var, "")]))
    yield monkeypatch


NOBODY = 65534


def as_nobody(*argv: str) -> None:
    """Run ``argv`` as ``nobody`` (uid/gid 65534, no groups): what another user of the host
    does. Skips without root and setpriv."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as nobody")
    subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv],
        check=True,
        capture_output=True,
        timeout=30,
    )


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A sticky world-writable directory like /tmp that ``nobody`` can reach (pytest's own
    tmp_path is 0700 all the way up: another user could plant nothing there)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="diag-shared-"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
