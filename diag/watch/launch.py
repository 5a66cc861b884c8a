"""Launch mode (``diag capture|watch -- CMD ...``): run the user's command as diag's child.

Why each choice:

* **Own session / process group** (``start_new_session``): a terminal Ctrl-C reaches diag
  only, and diag forwards it to the whole group of the child *first* - so a launched server
  (and the ranks it forked) sees the same SIGINT it would see without diag - and only then
  writes the report. Its stdin is /dev/null: a process group that is not the terminal's
  foreground group would be stopped by SIGTTIN if it read the terminal.
* **Tee, through files**: the child's stdout and stderr are files, not pipes to diag (a
  pipe whose reader died kills the writer with SIGPIPE on its next line: diag crashing or
  being OOM-killed would take the job down). Each stream is a spool file beside the report
  (``.NAME.log.stdout`` / ``.stderr``, created O_EXCL, mode 0600) that the child appends to;
  diag follows it, copying it to the terminal unchanged, as it arrives (progress bars
  included), and to ``PATH.log`` line by line. The terminal is the user's own output; the log
  file lands beside a report meant to be attached to tickets, so every line written there
  passes through ``scrub`` (the Redactor's scrubbing of known secret values). When the child
  ended and its output was copied, the spool files are removed; if diag died first they stay
  (raw, 0600) and the job ran on unharmed.
* **Exit code**: Popen's convention, so it is unambiguous: ``N >= 0`` is ``exit(N)``, ``-S``
  means killed by signal ``S`` (a shell would show ``128 + S``).

diag does not propagate the child's exit code as its own: diag's exit codes keep the meaning
the table in ``diag.errors`` gives them (use ``--fail-on exited`` to fail on an exit).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from diag.bundle import outdir
from diag.bundle.io import write_error
from diag.bundle.outdir import Backoff, OutputDir
from diag.errors import EXIT_NO_TARGET, EXIT_USAGE, DiagError
from diag.probes.logs import spool_path
from diag.redaction.stream import split_scrubbed

_CHUNK_BYTES = 65536
_MAX_HELD_BYTES = 1 << 20  # a line held back for a safe cut past this is written anyway
_POLL_S = 0.05  # how often a tee looks for new output in its spool file


def _identity(text: str) -> str:
    return text


class _Tee:
    """Follows one spool file the child appends to: to the terminal (raw, as it arrives) and
    to the log (scrubbed lines). Stops once told the child ended and the file is drained."""

    def __init__(
        self,
        spool: IO[bytes],
        terminal: Optional[IO[bytes]],
        log: _Log,
        scrub: Callable[[str], str],
    ) -> None:
        self._spool = spool
        self._terminal = terminal
        self._log = log
        self._scrub = scrub
        self._partial = b""
        self.finish = threading.Event()  # set when no more output will come
        self.thread = threading.Thread(target=self._run, name="diag-tee", daemon=True)

    def _to_terminal(self, chunk: bytes) -> None:
        terminal = self._terminal
        if terminal is None:
            return
        try:
            terminal.write(chunk)
            terminal.flush()
        except (OSError, ValueError):
            # The terminal went away (`diag watch -- cmd | head`): keep logging regardless.
            self._terminal = None

    def _to_log(self, lines: List[bytes]) -> None:
        text = b"".join(lines).decode("utf-8", "replace")
        self._log.write(self._scrub(text).encode("utf-8", "replace"))

    def _to_log_held(self, partial: bytes) -> bytes:
        """Write the part of a line that never ends that no secret straddles, and return the
        rest to keep for the next read (``diag.redaction.stream``): two pieces scrubbed
        apart would each hold half a secret, and the file both halves."""
        text = partial.decode("utf-8", "surrogateescape")
        give_up = len(partial) > _MAX_HELD_BYTES
        done, rest = split_scrubbed(self._scrub, text, give_up=give_up)
        if done:
            self._log.write(done.encode("utf-8", "replace"))
        return rest.encode("utf-8", "surrogateescape")

    def _run(self) -> None:
        fd = self._spool.fileno()
        while True:
            finishing = self.finish.is_set()  # read before the last read: nothing is missed
            try:
                chunk = os.read(fd, _CHUNK_BYTES)
            except OSError:
                chunk = b""
            if not chunk:
                if finishing:
                    break
                self.finish.wait(_POLL_S)
                continue
            self._to_terminal(chunk)
            data = self._partial + chunk
            cut = data.rfind(b"\n") + 1
            self._partial = data[cut:]
            if cut:
                self._to_log([data[:cut]])
            if len(self._partial) > _CHUNK_BYTES:  # a line that never ends (a progress bar)
                self._partial = self._to_log_held(self._partial)
        self._spool.close()

    def flush_partial(self) -> None:
        """The child's unterminated last line, once this tee stopped: written after every
        tee's complete lines (``drain``), so a last line without newline stays last."""
        if self._partial and not self.thread.is_alive():
            self._to_log([self._partial, b"\n"])
            self._partial = b""


class _Log:
    """``PATH.log``, written by both tees under one lock; a write that fails (disk full,
    read-only, I/O error, directory removed) never stops the tees (the terminal still gets
    everything, the spool files keep it all): it is recorded (``error``, the first), the lines
    are lost from this file only (``lost``: the spools are then kept), and writing is tried
    again after a backoff."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.error: Optional[OSError] = None
        self.lost = False
        self._lock = threading.Lock()
        self._retry = Backoff()

    def write(self, data: bytes) -> None:
        with self._lock:
            if self.fd < 0:
                return
            if not self._retry.ready():
                self.lost = True
                return
            try:
                outdir.write_all(self.fd, data)
            except OSError as exc:
                self.error = self.error or exc
                self.lost = True
                self._retry.failed()
                return
            self._retry.succeeded()

    def close(self) -> None:
        with self._lock:
            fd, self.fd = self.fd, -1
        if fd < 0:
            return
        try:
            outdir.sync_and_close(fd)
        except OSError as exc:
            self.error = self.error or exc
            self.lost = True


def _spool(directory: OutputDir, log_name: str, stream: str) -> Tuple[int, IO[bytes], str]:
    """(write fd for the child, read handle for diag, name) of one stream's spool file, both
    opened relative to the output directory's handle, never through a link."""
    name = os.path.basename(spool_path(log_name, stream))
    fds: List[int] = []
    try:
        fds.append(directory.create(name))
        fds.append(directory.reopen(name, os.O_WRONLY | os.O_APPEND))
        fds.append(directory.reopen(name, os.O_RDONLY))
        if len({os.fstat(fd).st_ino for fd in fds}) != 1:  # swapped under us
            raise OSError(f"{directory.path(name)} changed while it was created")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    os.close(fds[0])
    return fds[1], os.fdopen(fds[2], "rb"), name


class LaunchedCommand:
    """A running child started by ``launch``: its PID, its exit code once it ended, its log."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        argv: Sequence[str],
        log_path: Path,
        log: _Log,
        tees: List[_Tee],
        spools: Sequence[str],
        directory: OutputDir,
        own_directory: bool,
        rescrub: Optional[Callable[[bytes], bytes]] = None,
    ) -> None:
        self._proc = proc
        self._rescrub = rescrub
        self.argv = tuple(argv)
        self.log_path = log_path
        self.log = log
        self._tees = tees
        self._spools = tuple(spools)
        self._directory = directory
        self._own_directory = own_directory
        self.started_s = time.time()

    @property
    def spool_paths(self) -> Tuple[Path, ...]:
        """The raw spool files (kept when ``PATH.log`` lost lines or the child outlived diag)."""
        return tuple(self._directory.path(name) for name in self._spools)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def poll(self) -> Optional[int]:
        """The exit code once the child ended (reaping it), else None."""
        return self._proc.poll()

    @property
    def exit_code(self) -> Optional[int]:
        return self._proc.returncode

    def forward(self, signum: int) -> None:
        """Send ``signum`` to the child's whole process group, as a terminal would."""
        if self._proc.returncode is not None:
            return
        try:
            os.killpg(self._proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, timeout_s: float) -> Optional[int]:
        """Wait up to ``timeout_s`` for the child to exit; its exit code, or None."""
        try:
            return self._proc.wait(timeout=max(timeout_s, 0.0))
        except subprocess.TimeoutExpired:
            return None

    def terminate(self, grace_s: float) -> Optional[int]:
        """SIGTERM to the group, SIGKILL if it is still there after ``grace_s``; exit code."""
        if self.poll() is not None:
            return self.exit_code
        self.forward(signal.SIGTERM)
        if self.wait(grace_s) is None:
            self.forward(signal.SIGKILL)
            self.wait(grace_s)
        return self.exit_code

    def drain(self, timeout_s: float = 2.0) -> None:
        """Copy what the child wrote before it exited (its spool files, to their end).

        While the child runs, the tees keep following; once it exited they read to the end
        and stop. After ``timeout_s`` diag stops waiting for them rather than hanging."""
        if self.poll() is not None:
            for tee in self._tees:
                tee.finish.set()
        deadline = time.monotonic() + timeout_s
        for tee in self._tees:
            tee.thread.join(max(deadline - time.monotonic(), 0.0))
        for tee in self._tees:
            tee.flush_partial()

    def close(self) -> None:
        self.drain(0.5)
        copied = all(not tee.thread.is_alive() for tee in self._tees)
        self.log.close()
        if self._rescrub is not None:
            _rescrub_log(self._directory, self.log_path.name, self._rescrub)
        if copied and self.poll() is not None and not self.log.lost:
            for name in self._spools:  # all in PATH.log: the raw spools go
                try:
                    self._directory.unlink(name)
                except OSError:
                    pass
        if self._own_directory:
            self._directory.close()


# The largest PATH.log scrubbed again at the end (read whole): a bigger one keeps its lines
# as they were scrubbed when written.
_MAX_RESCRUB_BYTES = 512 << 20


def _rescrub_log(directory: OutputDir, name: str, rescrub: Callable[[bytes], bytes]) -> None:
    """``PATH.log`` scrubbed of the values learned after its lines were written (a secret the
    job printed before the process carrying it appeared), rewritten atomically within the
    directory handle - only when such a value is in it."""
    try:
        fd = directory.reopen(name, os.O_RDONLY)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(_MAX_RESCRUB_BYTES + 1)
        if len(data) > _MAX_RESCRUB_BYTES:
            return
        scrubbed = rescrub(data)
        if scrubbed is not data:
            directory.write_atomic(name, scrubbed)
    except OSError:
        pass  # the log stays as written; the job and the watch are unharmed


def launch(
    argv: Sequence[str],
    log_path: Union[str, Path],
    *,
    scrub: Callable[[str], str] = _identity,
    terminal_out: Optional[IO[bytes]] = None,
    terminal_err: Optional[IO[bytes]] = None,
    env: Optional[Dict[str, str]] = None,
    directory: Optional[OutputDir] = None,
    rescrub: Optional[Callable[[bytes], bytes]] = None,
) -> LaunchedCommand:
    """Start ``argv`` in its own session, teeing stdout/stderr to the terminal and ``log_path``.

    ``terminal_out``/``terminal_err`` default to diag's own stdout/stderr. ``directory`` is
    the checked handle of ``log_path``'s directory (a watch's): the log and the spools are
    created relative to it, and stay there whatever happens to the path afterwards.
    ``rescrub`` (``Redactor.rescrub_bytes`` since launch) runs over the whole log at ``close``.
    """
    if not argv:
        raise DiagError("no command given after --", "write: diag watch -- CMD ARGS...", EXIT_USAGE)
    path = Path(log_path)
    own = directory is None
    files = _open_files(path, directory)
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=files.out_fd,
            stderr=files.err_fd,
            start_new_session=True,
            env=env,
        )
    except OSError as exc:
        files.log.close()
        files.out_read.close()
        files.err_read.close()
        for leftover in (path.name, *files.spools):
            try:
                files.directory.unlink(leftover)  # no command ran: leave no empty log behind
            except OSError:
                pass
        if own:
            files.directory.close()
        raise DiagError(
            f"cannot run {argv[0]}: {exc.strerror or exc}",
            "check the command after -- (is it installed, on PATH, executable?)",
            EXIT_NO_TARGET,
        ) from exc
    finally:
        os.close(files.out_fd)
        os.close(files.err_fd)
    out = terminal_out if terminal_out is not None else sys.stdout.buffer
    err = terminal_err if terminal_err is not None else sys.stderr.buffer
    tees = [
        _Tee(files.out_read, out, files.log, scrub),
        _Tee(files.err_read, err, files.log, scrub),
    ]
    for tee in tees:
        tee.thread.start()
    return LaunchedCommand(
        proc, argv, path, files.log, tees, list(files.spools), files.directory, own, rescrub
    )


class _Files(NamedTuple):
    """What a launch writes into: the log, and one spool per stream (the child's write fd,
    diag's read handle)."""

    directory: OutputDir
    log: _Log
    out_fd: int
    out_read: IO[bytes]
    err_fd: int
    err_read: IO[bytes]
    spools: Tuple[str, ...]


def _open_files(path: Path, directory: Optional[OutputDir]) -> _Files:
    """The log and the two spools, created relative to ``directory`` (opened here from
    ``path``'s parent when None); on a failure, nothing is left behind."""
    own = directory is None
    fds: List[int] = []
    spools: List[str] = []
    try:
        if directory is None:
            directory = OutputDir.open_plain(path.parent)
        log = _Log(directory.create(path.name))
        out_fd, out_read, out_name = _spool(directory, path.name, "stdout")
        fds.append(out_fd)
        spools.append(out_name)
        err_fd, err_read, err_name = _spool(directory, path.name, "stderr")
        fds.append(err_fd)
        spools.append(err_name)
    except OSError as exc:
        for fd in fds:
            os.close(fd)
        if directory is not None:
            for spool in spools:
                directory.unlink(spool)
            if own:
                directory.close()
        raise write_error(path, exc) from exc  # ENOSPC: exit 11, as for every write
    return _Files(directory, log, out_fd, out_read, err_fd, err_read, tuple(spools))


def describe_exit(code: Optional[int]) -> str:
    """``exit code 3`` / ``killed by SIGTERM`` / ``still running``: for status lines and logs."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
