"""The log files a job writes: size, line count, mtime, inode, and its first and last lines.

Which files: fd 1 and 2 of every process when they are regular files (``> train.log 2>&1``),
other fds open *for writing* on files that look like logs (``*.log``, ``*.out``, ``*.err``,
``*.log.N``; ``*.txt``/``*.jsonl`` only under a directory whose name says log), and every
``--log PATH`` the user names (tracked even before it exists). A stdout that is a pipe to a
launcher (torchrun, a Slurm step, ``| tee``) cannot be read from here: that is recorded in
``notes`` and the user can pass the launcher's log with ``--log``. Paths are read in diag's own
mount namespace; a target in another container needs the path as diag sees it.

Cheap on a multi-GB log: each sample reads only the bytes appended since the last one (offset
and newline count remembered per path and inode), the tail from the last 64 KiB and the head
once per file. A rotated file (new inode) or a truncated one (size below the offset) is
recounted from the start. A file already larger than ``INITIAL_COUNT_LIMIT_BYTES`` when first
seen is not read through: its count starts at diag's first sample and ``lines_exact`` is False,
so line *deltas* stay true without minutes of I/O. The bytes written between two samples (the
last ``MAX_DEATH_SCAN_BYTES`` of them) are also searched for lines saying a process died
(``deaths``): a server shutting down on a worker's death writes pages of traceback after the
line that names it, which would otherwise scroll out of the tail unseen. Lines are redacted
whole, then cut to ``MAX_LINE_CHARS``; a ``\\r``-updated progress bar shows as its last state,
like a terminal.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from dataclasses import dataclass
from typing import BinaryIO, Dict, List, Optional, Sequence, Set, Tuple

from diag.bundle.files import NotRegularFile, open_regular
from diag.model import LogSample
from diag.probes.procfs import ProcFS
from diag.redaction.redact import Redactor
from diag.text.death_lines import DEATH_KEYWORDS, PROCESS_DEATH_BYTES

HEAD_LINES = 20
TAIL_LINES = 50
MAX_LINE_CHARS = 400
EDGE_BYTES = 64 * 1024
INITIAL_COUNT_LIMIT_BYTES = 256 * 1024 * 1024
MAX_COUNT_BYTES_PER_SAMPLE = 256 * 1024 * 1024
MAX_DISCOVERED_FILES = 32
_CHUNK_BYTES = 1024 * 1024
# Lines saying a process died, kept from the bytes written between two samples: at most this
# many per sample, searched in at most the last MAX_DEATH_SCAN_BYTES of them.
MAX_DEATH_LINES = 16
MAX_DEATH_SCAN_BYTES = 8 * 1024 * 1024
_MAX_DEATH_LINE_BYTES = 4096  # of the line around a match (a longer line is cut)
_PREFIX_BYTES = 256

_LOG_SUFFIXES = (".log", ".out", ".err", ".stdout", ".stderr")
_LOGDIR_SUFFIXES = (".txt", ".jsonl")
_ROTATED_RE = re.compile(r"\.(?:log|out|err)\.\d+$")
_NOT_LOG_SUFFIXES = (
    ".so", ".py", ".pyc", ".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".gguf", ".npy",
    ".npz", ".h5", ".arrow", ".parquet", ".tar", ".zip", ".gz", ".idx", ".db", ".sqlite",
    ".lock",
)  # fmt: skip
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


SPOOL_STREAMS = ("stdout", "stderr")


def spool_path(log_path: str, stream: str) -> str:
    """Where launch mode spools a child's ``stream`` beside ``log_path`` (diag.watch.launch)."""
    head, name = os.path.split(log_path)
    return os.path.join(head, f".{name}.{stream}")


def looks_like_log(path: str) -> bool:
    """True for paths worth tracking as logs when a process holds them open for writing."""
    lower = path.lower()
    if lower.startswith(("/dev/", "/proc/", "/sys/")) or lower.endswith(_NOT_LOG_SUFFIXES):
        return False
    if lower.endswith(_LOG_SUFFIXES) or _ROTATED_RE.search(lower):
        return True
    if lower.endswith(_LOGDIR_SUFFIXES):
        return any("log" in part for part in lower.split("/")[:-1])
    return False


def is_write_mode(fdinfo: str) -> bool:
    """True when /proc/P/fdinfo/N's octal ``flags`` open the file O_WRONLY or O_RDWR."""
    match = re.search(r"^flags:\s*([0-7]+)", fdinfo, re.MULTILINE)
    return match is not None and (int(match.group(1), 8) & 0o3) in (1, 2)


def clean_line(raw: bytes) -> str:
    """Decode one log line for display: last ``\\r`` segment, no ANSI codes, cut to size."""
    return shown_line(decode_line(raw))


def decode_line(raw: bytes) -> str:
    """One log line decoded, without colour codes or control characters - ``\\r`` kept: the
    whole line is what is scrubbed (``LogTracker._clean``), before ``shown_line`` keeps its
    last ``\\r`` segment and cuts it, so a ``key=\\rVALUE`` or a secret straddling the cut
    is seen whole."""
    text = raw.decode("utf-8", "replace").rstrip("\r\n")
    return _CONTROL_RE.sub("", _ANSI_RE.sub("", text))


def shown_line(text: str) -> str:
    """What a terminal shows of a (scrubbed) line: its last ``\\r`` segment, cut to size."""
    if "\r" in text:
        segments = [s for s in text.split("\r") if s.strip()]
        text = segments[-1] if segments else ""
    if len(text) > MAX_LINE_CHARS:
        text = text[:MAX_LINE_CHARS] + f"...[+{len(text) - MAX_LINE_CHARS} chars]"
    return text


def head_lines(data: bytes, at_eof: bool, count: int = HEAD_LINES) -> List[bytes]:
    """The first ``count`` complete lines of ``data`` (a partial last line only at EOF)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines and not at_eof:
        lines.pop()  # cut by the read window, not by the file
    return lines[:count]


def tail_lines(data: bytes, at_start: bool, count: int = TAIL_LINES) -> List[bytes]:
    """The last ``count`` lines of ``data``; the first is dropped unless it starts the file."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if lines and not at_start:
        first = lines.pop(0)  # started mid-line
        # ... except a progress bar redrawn with \r and no newline (tqdm in a log): every
        # segment after the window's first \r is whole, and the last one is its state now.
        if b"\r" in first:
            lines.insert(0, first.split(b"\r", 1)[1])
    return lines[-count:]


@dataclass
class _FileState:
    """What is remembered about one (path, inode) between samples."""

    dev: int
    inode: int
    offset: int = 0
    newlines: int = 0
    ends_with_newline: bool = True
    exact: bool = True
    prefix: bytes = b""
    head: Tuple[str, ...] = ()
    tail_key: Optional[Tuple[int, int]] = None
    tail: Tuple[str, ...] = ()
    deaths: Tuple[str, ...] = ()  # death lines among the bytes read this sample
    # Read at a sample before (or a successor of one that was, after a rotation): what it
    # grows by from now on was written while diag watched.
    watched: bool = False


def death_lines_in(data: bytes, limit: int = MAX_DEATH_LINES) -> List[bytes]:
    """The lines of ``data`` that say a process died (``PROCESS_DEATH_BYTES``), in order, at
    most ``limit``, each cut to ``_MAX_DEATH_LINE_BYTES`` around its match. Only the lines
    holding a ``DEATH_KEYWORDS`` word are matched against the pattern (the regex over 8 MB of
    ordinary lines took 0.9 s; the word search 40 ms), and at most ``8 * limit`` of those."""
    lowered = data.lower()
    starts: Set[int] = set()
    for word in DEATH_KEYWORDS:
        at = lowered.find(word)
        while at >= 0 and len(starts) < 8 * limit:
            starts.add(lowered.rfind(b"\n", 0, at) + 1)
            at = lowered.find(b"\n", at)
            at = lowered.find(word, at) if at >= 0 else -1
    out: List[bytes] = []
    for line_start in sorted(starts):
        after = data.find(b"\n", line_start)
        line = data[line_start : len(data) if after < 0 else after]
        m = PROCESS_DEATH_BYTES.search(line)
        if m is None:
            continue
        floor = max(0, m.start() - _MAX_DEATH_LINE_BYTES)
        out.append(line[floor : m.end() + _MAX_DEATH_LINE_BYTES])
        if len(out) >= limit:
            break
    return out


class LogTracker:
    """Discovers the logs of a set of processes and samples them incrementally."""

    def __init__(
        self,
        redactor: Redactor,
        extra_paths: Sequence[str] = (),
        procfs: Optional[ProcFS] = None,
    ) -> None:
        self.redactor = redactor
        self.procfs = procfs or ProcFS()
        self._lock = threading.Lock()
        # A path the user named is resolved once (a symlink they chose is followed now); a later
        # swap of it for a link is then refused when read (``open_regular``).
        self._extra = [os.path.realpath(p) for p in extra_paths]
        self._spools = {spool_path(p, s) for p in self._extra for s in SPOOL_STREAMS}
        self._pids: Dict[str, Set[int]] = {p: set() for p in self._extra}
        self._state: Dict[str, _FileState] = {}
        self._notes: Dict[str, str] = {}

    @property
    def paths(self) -> Tuple[str, ...]:
        with self._lock:
            return tuple(sorted(self._pids))

    def notes(self) -> Tuple[str, ...]:
        """Why some output could not be read (pipes, deleted files, unreadable files)."""
        with self._lock:
            return tuple(self._notes[k] for k in sorted(self._notes))

    def discover(self, pids: Sequence[int]) -> None:
        """Add the log files ``pids`` write now; files found before stay tracked."""
        found: List[Tuple[str, int]] = []
        notes: Dict[str, str] = {}
        for pid in pids:
            for fd in self.procfs.fds(pid):
                target = self.procfs.readlink(pid, "fd", str(fd))
                if target is None:
                    continue
                path = self._classify_fd(pid, fd, target, notes)
                if path is not None:
                    found.append((path, pid))
        with self._lock:
            self._notes.update(notes)
            for path, pid in found:
                if path not in self._pids:
                    discovered = len(self._pids) - len(self._extra)
                    if discovered >= MAX_DISCOVERED_FILES:
                        self._notes["cap"] = (
                            f"more than {MAX_DISCOVERED_FILES} log files open; the rest are "
                            "not tracked (name the important ones with --log)"
                        )
                        continue
                    self._pids[path] = set()
                self._pids[path].add(pid)

    def _classify_fd(self, pid: int, fd: int, target: str, notes: Dict[str, str]) -> Optional[str]:
        stdio = fd in (1, 2)
        name = "stdout" if fd == 1 else "stderr"
        if target.startswith("pipe:"):
            if stdio:
                notes[f"pipe:{pid}:{fd}"] = (
                    f"pid {pid} {name} is a pipe (to its launcher); its output cannot be read "
                    "here - pass the launcher's log file with --log"
                )
            return None
        if not target.startswith("/") or target.startswith(("/dev/", "/proc/", "/sys/")):
            return None
        if target in self._spools:  # a launched child's raw output: its PATH.log is tracked
            return None
        if target.endswith(" (deleted)"):
            if stdio or looks_like_log(target[: -len(" (deleted)")]):
                notes[f"deleted:{target}"] = f"pid {pid} writes to a deleted file {target}"
            return None
        if not stdio:
            if not looks_like_log(target):
                return None
            fdinfo = self.procfs.try_read_text(pid, "fdinfo", str(fd)) or ""
            if not is_write_mode(fdinfo):
                return None
        try:
            if not stat.S_ISREG(os.stat(target).st_mode):
                return None
        except OSError:
            return None
        return target

    def sample(self) -> Tuple[LogSample, ...]:
        """One ``LogSample`` per tracked file, sorted by path."""
        with self._lock:
            tracked = sorted((p, tuple(sorted(pids))) for p, pids in self._pids.items())
            return tuple(self._sample_one(path, pids) for path, pids in tracked)

    def _sample_one(self, path: str, pids: Tuple[int, ...]) -> LogSample:
        # Opened without following a symlink and refused unless a regular file: a log the
        # job's user swapped for a link to /dev/zero or a FIFO must not be read (or block).
        try:
            fh = open_regular(path)
        except NotRegularFile as exc:
            self._state.pop(path, None)
            self._notes[f"read:{path}"] = f"not read: {exc}"
            return LogSample(path=path, pids=pids, exists=True, error=f"not read: {exc}")
        except FileNotFoundError:
            self._state.pop(path, None)
            return LogSample(path=path, pids=pids, exists=False)
        except OSError as exc:
            self._state.pop(path, None)
            why = f"cannot read {path}: {exc.strerror or exc}"
            self._notes[f"read:{path}"] = why
            return LogSample(path=path, pids=pids, exists=True, error=why)
        with fh:
            st = os.fstat(fh.fileno())
            try:
                state = self._current_state(path, fh, st)
                self._update(fh, state, st.st_size, (st.st_size, st.st_mtime_ns))
            except OSError as exc:
                self._notes[f"read:{path}"] = f"cannot read {path}: {exc.strerror or exc}"
                state = self._state.setdefault(path, _FileState(dev=st.st_dev, inode=st.st_ino))
        lines = state.newlines + (0 if state.ends_with_newline else 1)
        return LogSample(
            path=path,
            pids=pids,
            exists=True,
            size_bytes=st.st_size,
            lines=lines,
            lines_exact=state.exact,
            mtime_s=st.st_mtime,
            inode=st.st_ino,
            head=state.head,
            tail=state.tail,
            deaths=state.deaths,
        )

    def _current_state(self, path: str, fh: BinaryIO, st: os.stat_result) -> _FileState:
        """The remembered state, or a fresh one if the file was rotated, truncated or rewritten.

        Rotation changes the inode; truncation shrinks the size below the counted offset; a
        copytruncate followed by fast regrowth is caught by the first bytes changing.
        """
        state = self._state.get(path)
        rewritten = False
        if state is not None and state.prefix:
            fh.seek(0)
            rewritten = fh.read(len(state.prefix)) != state.prefix
        if (
            state is None
            or rewritten
            or (state.dev, state.inode) != (st.st_dev, st.st_ino)
            or st.st_size < state.offset
        ):
            first_sight = state is None
            state = _FileState(dev=st.st_dev, inode=st.st_ino, watched=not first_sight)
            if first_sight and st.st_size > INITIAL_COUNT_LIMIT_BYTES:
                state.offset, state.exact = st.st_size, False
            self._state[path] = state
        if len(state.prefix) < _PREFIX_BYTES and st.st_size > len(state.prefix):
            fh.seek(0)
            state.prefix = fh.read(_PREFIX_BYTES)
        return state

    def _update(
        self, fh: BinaryIO, state: _FileState, size_bytes: int, key: Tuple[int, int]
    ) -> None:
        pending = size_bytes - state.offset
        if pending > MAX_COUNT_BYTES_PER_SAMPLE:  # a burst too big to count now: skip ahead
            state.offset, state.exact = size_bytes - MAX_COUNT_BYTES_PER_SAMPLE, False
        # Bytes written while diag watched (not a file's past on first sight, which the tail
        # shows) are searched for death lines: one can scroll past between two tails.
        scan_from = size_bytes - MAX_DEATH_SCAN_BYTES if state.watched else None
        fh.seek(state.offset)
        last = b""
        carry = b""  # the unfinished last line of the previous chunk, for the death search
        deaths: List[bytes] = []
        while state.offset < size_bytes:
            chunk = fh.read(min(_CHUNK_BYTES, size_bytes - state.offset))
            if not chunk:
                break
            if scan_from is not None and state.offset + len(chunk) > scan_from:
                data = carry + chunk
                cut = data.rfind(b"\n") + 1 if state.offset + len(chunk) < size_bytes else len(data)
                deaths += death_lines_in(data[:cut], MAX_DEATH_LINES - len(deaths))
                carry = data[cut:][-_MAX_DEATH_LINE_BYTES:]
            state.newlines += chunk.count(b"\n")
            state.offset += len(chunk)
            last = chunk[-1:]
        if last:
            state.ends_with_newline = last == b"\n"
        state.deaths = self._clean(deaths)
        state.watched = True
        if len(state.head) < HEAD_LINES and size_bytes > 0 and state.tail_key != key:
            fh.seek(0)
            data = fh.read(min(EDGE_BYTES, size_bytes))
            state.head = self._clean(head_lines(data, at_eof=len(data) >= size_bytes))
        if state.tail_key != key:
            start = max(0, size_bytes - EDGE_BYTES)
            fh.seek(start)
            state.tail = self._clean(tail_lines(fh.read(size_bytes - start), at_start=start == 0))
            state.tail_key = key

    def _clean(self, lines: List[bytes]) -> Tuple[str, ...]:
        """Scrubbed whole, then cut: a line cut first would cut a secret with it, and the
        half left is no longer recognisable."""
        scrubbed = self.redactor.scrub_lines([decode_line(raw) for raw in lines])
        return tuple(shown_line(line) for line in scrubbed)
