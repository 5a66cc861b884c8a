"""diag's end of the long-lived NVML worker: one request, one JSON line, under a deadline.

The worker (``diag.probes.gpu.nvml_worker``) is a child process in its own session (Ctrl-C on the
terminal is diag's to handle, not the worker's), reading requests on its stdin. Answers are
read from the raw pipe with ``selectors`` until a newline or the deadline, so a worker hung in
the driver costs at most the deadline; the caller then kills it. Its stderr goes to an
unnamed temporary file, read only when it dies: a chatty worker can never block on a full pipe.

Closing stdin ends the worker (it exits at end of input); ``close`` does that, waits briefly,
and kills it if it lingers. If diag itself dies, the kernel closes the pipe and the worker
exits on its own: no orphan outlives diag unless it is stuck in the driver, where nothing helps.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import tempfile
import time
from typing import Mapping, Optional

from diag.probes.pychild import TRUSTED_CWD, python_module_argv
from diag.probes.runner import ProbeError

WORKER_MODULE = "diag.probes.gpu.nvml_worker"
_REQUEST = b"read\n"
_READ_CHUNK_BYTES = 65536
_REAP_WAIT_S = 1.0
_CLOSE_GRACE_S = 0.5


class WorkerGone(ProbeError):
    """The worker exited (crashed, or was killed by someone else) instead of answering."""


class WorkerTimeout(ProbeError):
    """No answer before the deadline: the worker may be stuck in the driver."""


class NvmlWorker:
    """One started worker process and its pipes."""

    def __init__(self, python: str = sys.executable, env: Optional[Mapping[str, str]] = None):
        # Lives as long as the worker (read when it dies), closed in ``_release``.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                # Not from diag's cwd (a job's directory): a planted pynvml.py would run as root.
                python_module_argv(WORKER_MODULE, python),
                cwd=TRUSTED_CWD,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                bufsize=0,
            )
        except BaseException:
            self._stderr.close()
            raise
        self._buffer = b""
        self._selector = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> Optional[int]:
        return self.proc.poll()

    def request(self, timeout_s: float) -> str:
        """Ask once; the answer line, or ``WorkerTimeout`` / ``WorkerGone``."""
        deadline = time.monotonic() + timeout_s
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(_REQUEST)
        except (BrokenPipeError, ValueError):
            raise WorkerGone(self._gone_message()) from None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0 or not self._selector.select(remaining_s):
                raise WorkerTimeout(f"no answer within {timeout_s:g}s")
            chunk = os.read(fd, _READ_CHUNK_BYTES)
            if not chunk:
                raise WorkerGone(self._gone_message())
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace")

    def _gone_message(self) -> str:
        code = self._reap(_REAP_WAIT_S)
        return f"NVML worker exited with {code}: {self.stderr_tail()}".rstrip(": ")

    def stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        return lines[-1][:200] if lines else ""

    def _reap(self, wait_s: float) -> Optional[int]:
        try:
            return self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> bool:
        """SIGKILL and reap; False when it did not die (stuck in the driver: D state)."""
        try:
            self.proc.kill()
        except OSError:
            pass
        exited = self._reap(_REAP_WAIT_S) is not None
        self._release()
        return exited

    def close(self) -> None:
        """End of input ends the worker; one that lingers is killed."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        if self._reap(_CLOSE_GRACE_S) is None:
            self.kill()
        else:
            self._release()

    def _release(self) -> None:
        """Close our ends of the pipes; a worker that did not die keeps its Popen for ``poll``."""
        self._selector.close()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        self._stderr.close()
