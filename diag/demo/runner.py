"""``diag demo [NAME]``: start a built-in job, wait until it is in its state, diagnose, kill.

The runner does to a demo job exactly what a user does to a real one - ``diag capture --pid``
(``run_capture`` with the capture defaults: 3 samples 2 s apart) or, with ``--watch``,
``diag watch --pid`` for a fixed number of samples (``run_session``) - so what it prints is
what diag prints on a real job, and the reports land in ``--out-dir`` (``<name>.json``,
``.html``, ``.md``; a watch adds the ``.jsonl`` journal). The job's own output goes to
``<name>.log`` beside them (diag follows it like any job log).

The job runs in its own session, so one ``killpg`` ends the launcher and every rank - also a
SIGSTOPped rank, a zombie's siblings, and multiprocessing's resource tracker - whatever ends
the demo: the verdict, Ctrl-C, SIGTERM or an error. A demo job never outlives ``diag demo``.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional

from diag.demo._ranks import READY_FD_ENV, WORK_DIR_ENV
from diag.errors import EXIT_OUTPUT, EXIT_TARGET_GONE, EXIT_USAGE, DiagError
from diag.probes.rank_sources import LOCAL_RANK_ENV, RANK_ENV, WORLD_SIZE_ENV

READY_TIMEOUT_S = 30.0  # four ranks start in ~1 s on two cores; a loaded CI box gets 30x
GONE_TIMEOUT_S = 5.0
CAPTURE_INTERVAL_S = 2.0  # diag capture's defaults
CAPTURE_COUNT = 3
WATCH_INTERVAL_S = 2.0
WATCH_COUNT = 6  # 10 s of samples: the watch's verdict judges at least its last 10 s
DEFAULT_OUT_DIR = "diag-demo"

Echo = Callable[[str], None]


class Demo(NamedTuple):
    """One built-in job: its CLI name, its module, the verdict diag must give, what it is."""

    name: str
    module: str
    expect: str
    what: str


DEMOS: Dict[str, Demo] = {
    d.name: d
    for d in (
        Demo(
            "load",
            "diag.demo.job_load",
            "slow",
            "4 ranks: rank 0 dequantizes weights in pure Python, ranks 1-3 wait in a barrier",
        ),
        Demo(
            "diverged",
            "diag.demo.job_diverged",
            "deadlocked",
            "4 ranks: ranks 0-2 wait in all_reduce, rank 3 polls for a file in refresh_cache",
        ),
        Demo(
            "server",
            "diag.demo.job_server",
            "idle",
            "an HTTP server listening on 127.0.0.1, no requests",
        ),
        Demo(
            "train",
            "diag.demo.job_train",
            "progressing",
            "2 ranks train, all_reduce every step; rank 0 logs a step line every 0.2 s",
        ),
        Demo(
            "dead-rank",
            "diag.demo.job_dead_rank",
            "deadlocked",
            "4 ranks: rank 2 crashed (exit code 1), ranks 0, 1, 3 wait for it in a barrier",
        ),
        Demo(
            "stopped-rank",
            "diag.demo.job_stopped_rank",
            "deadlocked",
            "3 ranks: rank 1 is SIGSTOPped mid-training, ranks 0, 2 wait in all_reduce",
        ),
    )
}
DEFAULT_DEMO = "load"


def list_lines() -> List[str]:
    """``diag demo --list``: one line per demo - name, expected verdict, what it runs."""
    width = max(len(name) for name in DEMOS)
    return [
        f"{d.name:<{width}}  {d.expect:<11}  {d.what}"
        + (" (default)" if d.name == DEFAULT_DEMO else "")
        for d in DEMOS.values()
    ]


def find_demo(name: Optional[str]) -> Demo:
    demo = DEMOS.get(name or DEFAULT_DEMO)
    if demo is None:
        raise DiagError(
            f"no demo named {name!r}",
            f"choose one of {', '.join(DEMOS)} (diag demo --list)",
            EXIT_USAGE,
        )
    return demo


def prepare_out_dir(path: Path) -> Path:
    """Create ``--out-dir`` (0700: reports hold command lines and environments) or fail now,
    before a job is started."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise DiagError(
            f"cannot create the demo output directory {path}: {exc.strerror}",
            "choose a writable one with --out-dir DIR",
            EXIT_OUTPUT,
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise DiagError(
            f"demo output directory {path} is not writable",
            "choose a writable one with --out-dir DIR",
            EXIT_OUTPUT,
        )
    return path


def job_env(work_dir: Path, ready_fd: int) -> Dict[str, str]:
    """The user's environment minus any rank variables (``diag demo`` run inside a torchrun
    or MPI job must not lend its rank to the demo's launcher), plus the handshake."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (*RANK_ENV, *LOCAL_RANK_ENV, *WORLD_SIZE_ENV)
    }
    env.update({READY_FD_ENV: str(ready_fd), WORK_DIR_ENV: str(work_dir), "PYTHONUNBUFFERED": "1"})
    return env


class Job:
    """A demo job started in its own session, with a READY pipe and its output in a log."""

    def __init__(self, demo: Demo, out_dir: Path) -> None:
        self.demo = demo
        self.log_path = out_dir / f"{demo.name}.log"
        self.work_dir = out_dir / f".{demo.name}-work"
        shutil.rmtree(self.work_dir, ignore_errors=True)  # stale markers would fake READY
        self.work_dir.mkdir(mode=0o700)
        read_fd, write_fd = os.pipe()
        self._ready = os.fdopen(read_fd, "rb", buffering=0)
        try:
            log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(log_fd, "wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", demo.module],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=job_env(self.work_dir, write_fd),
                    cwd=str(self.work_dir),  # no ./diag in the user's cwd shadows ours
                    pass_fds=(write_fd,),
                    start_new_session=True,
                )
        finally:
            os.close(write_fd)
        self.pid = self.proc.pid

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Block until the job writes READY (or fail with its log as the place to look)."""
        deadline = time.monotonic() + timeout_s
        got = b""
        while b"READY" not in got:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._ready], [], [], left)[0]:
                raise DiagError(
                    f"demo job {self.demo.name!r} was not ready within {timeout_s:.0f} s",
                    f"the machine may be overloaded; its output is in {self.log_path}",
                    EXIT_TARGET_GONE,
                )
            chunk = self._ready.read(64)
            if not chunk:
                raise DiagError(
                    f"demo job {self.demo.name!r} exited before it was ready "
                    f"({_exit_text(self.proc.wait())})",
                    f"its output is in {self.log_path}; please report it",
                    EXIT_TARGET_GONE,
                )
            got += chunk

    def stop(self) -> None:
        """SIGKILL the whole session (a stopped rank dies too), reap the launcher, and wait
        briefly until no process of the group is left (zombies of reparented ranks are init's)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self._ready.close()
        deadline = time.monotonic() + GONE_TIMEOUT_S
        while any(True for _ in live_group_members(self.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        shutil.rmtree(self.work_dir, ignore_errors=True)


def live_group_members(pgid: int) -> Iterator[int]:
    """PIDs still alive (not zombies) in process group ``pgid``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            yield int(entry.name)


def _exit_text(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


class _TermAsInterrupt:
    """SIGTERM ends the demo like Ctrl-C does (the ``finally`` kills the job); without it a
    ``kill <diag>`` would leave the demo job's ranks waiting in their barrier."""

    def __enter__(self) -> None:
        self._previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, self._raise)

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGTERM, self._previous)

    @staticmethod
    def _raise(signum: int, frame: Optional[FrameType]) -> None:
        raise KeyboardInterrupt


def _capture(job: Job, out_dir: Path, out: Echo, err: Echo) -> None:
    from diag.commands.capture import run_capture
    from diag.commands.outcome import report_outcome

    json_path = out_dir / f"{job.demo.name}.json"
    err(
        f"diag: demo: diag capture --pid {job.pid} -o {json_path} "
        f"({CAPTURE_COUNT} samples, {CAPTURE_INTERVAL_S:.0f} s apart)"
    )
    outcome = run_capture(
        job.pid,
        interval_s=CAPTURE_INTERVAL_S,
        count=CAPTURE_COUNT,
        out=str(json_path),
        log_paths=(str(job.log_path),),
    )
    report_outcome(outcome, merged=False, fail_states=frozenset(), out=out, err=err)


def _watch(job: Job, out_dir: Path, err: Echo) -> None:
    from diag.watch.loop import WatchOptions
    from diag.watch.session import run_session

    base = out_dir / job.demo.name
    err(
        f"diag: demo: diag watch --pid {job.pid} --interval {WATCH_INTERVAL_S:.0f} "
        f"--count {WATCH_COUNT} -o {base}.html"
    )
    options = WatchOptions(interval_s=WATCH_INTERVAL_S, count=WATCH_COUNT)
    run_session(
        pid=job.pid,
        argv=(),
        out=str(base) + ".html",
        options=options,
        log_paths=(str(job.log_path),),
        echo=err,
    )


def run_demo(
    name: Optional[str],
    *,
    out_dir: Path = Path(DEFAULT_OUT_DIR),
    watch: bool = False,
    out: Echo,
    err: Echo,
) -> None:
    """Run one demo end to end: start, wait for READY, capture (or watch), always kill.

    ``out`` gets what ``diag capture`` prints on stdout (headline, files, verdict line);
    ``err`` gets the narration and, with ``watch``, the watch's status lines and summary."""
    demo = find_demo(name)
    out_dir = prepare_out_dir(out_dir)
    err(f"diag: demo {demo.name}: {demo.what} (diag should say: {demo.expect})")
    with _TermAsInterrupt():
        job = Job(demo, out_dir)
        try:
            job.wait_ready()
            err(f"diag: demo: job ready (launcher pid {job.pid}, output in {job.log_path})")
            if watch:
                _watch(job, out_dir, err)
            else:
                _capture(job, out_dir, out, err)
        finally:
            job.stop()
            err(f"diag: demo: stopped the demo job (process group {job.pid})")
