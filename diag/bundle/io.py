"""Reading and writing bundles: one JSON document, or an append-only JSON-lines journal.

``.json`` is the whole bundle in one document (``diag capture``). ``.jsonl`` is the journal a
``diag watch`` appends to as it goes, so a SIGKILL loses at most the sample in flight:

    {"kind": "header", "schema_version": 1, "created_s": ..., "host": {...}, "target": {...}}
    {"kind": "sample", "sample": {...}, "processes": [new ProcessInfo...], "stacks": {new...}}
    ...
    {"kind": "end", "target": {...}, "verdict": {...}}      (absent if the watch was killed)

Each sample line carries only the processes and stacks not seen before, so a stack that stays
the same all day is written once, and only the thread records that changed since the previous
line (``unchanged`` lists the rest; see ``diag.bundle.journal_delta``). ``load_bundle`` reads either
form; a journal without an ``end`` line, or with a torn last line, loads with
``complete=False``.

Writes of whole files are atomic (temp file + fsync + rename): a reader never sees half a file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

import msgspec

from diag.bundle import outdir
from diag.bundle.files import (
    NotRegularFile,
    kind_of,
    open_regular,
)
from diag.bundle.journal_delta import DeltaState, Unchanged
from diag.bundle.outdir import Backoff, OutputDir
from diag.bundle.rescrub import redactor_of, rescrub_journal
from diag.errors import EXIT_BAD_BUNDLE, EXIT_DISK_FULL, EXIT_OUTPUT, DiagError
from diag.model import (
    SCHEMA_VERSION,
    Bundle,
    HostInfo,
    ProbeFailure,
    ProcessInfo,
    RankCollectives,
    Sample,
    Stack,
    Target,
    Verdict,
)

_encoder = msgspec.json.Encoder()
_bundle_decoder = msgspec.json.Decoder(Bundle)


class _Header(msgspec.Struct, kw_only=True, tag_field="kind", tag="header"):
    schema_version: int = SCHEMA_VERSION
    created_s: float = 0.0
    host: HostInfo = HostInfo()
    target: Target = Target()
    failures: Tuple[ProbeFailure, ...] = ()


class _SampleLine(msgspec.Struct, kw_only=True, omit_defaults=True, tag_field="kind", tag="sample"):
    sample: Sample
    processes: Tuple[ProcessInfo, ...] = ()
    stacks: Dict[str, Stack] = {}
    unchanged: Tuple[Unchanged, ...] = ()


class _EndLine(msgspec.Struct, kw_only=True, omit_defaults=True, tag_field="kind", tag="end"):
    target: Optional[Target] = None
    verdict: Optional[Verdict] = None
    failures: Tuple[ProbeFailure, ...] = ()
    collectives: Tuple[RankCollectives, ...] = ()  # Flight Recorder dumps found by the end


_line_decoder = msgspec.json.Decoder(Union[_Header, _SampleLine, _EndLine])


# What to do about a failed write, by errno (ENOSPC/EDQUOT have their own exit code).
_WRITE_REMEDIES = {
    errno.EROFS: "the file system is read-only: remount it read-write or choose another "
    "location with -o PATH",
    errno.EIO: "the device reported an I/O error: check the disk (dmesg) or choose another "
    "location with -o PATH",
    errno.ENOENT: "the output directory was removed: choose an existing one with -o PATH",
    errno.EPERM: "the directory or file refuses the write (immutable? chattr -i) or choose "
    "another location with -o PATH",
}


def write_error(path: Union[str, Path], exc: OSError, verb: str = "write") -> DiagError:
    """The DiagError of a failed write: ``EXIT_DISK_FULL`` for ENOSPC/EDQUOT, else
    ``EXIT_OUTPUT`` (read-only, I/O error, removed directory, permission) with its remedy."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return DiagError(
            f"cannot {verb} {path}: the disk is full ({exc.strerror or exc})",
            "free disk space; what was written before renders with diag report",
            EXIT_DISK_FULL,
        )
    return DiagError(
        f"cannot {verb} {path}: {exc.strerror or exc}",
        _WRITE_REMEDIES.get(
            exc.errno or 0, "free disk space or choose another location with -o PATH"
        ),
        EXIT_OUTPUT,
    )


def encode_bundle(bundle: Bundle) -> bytes:
    return _encoder.encode(bundle)


def atomic_write_bytes(
    path: Union[str, Path], data: bytes, directory: Optional[OutputDir] = None
) -> None:
    """Write ``data`` so that ``path`` is always either the old file or the whole new one.

    ``directory`` is the open handle of ``path``'s directory (a watch's, checked once); without
    it the parent is opened for this one write. The file is created and renamed relative to
    the handle, never through a link (``OutputDir.write_atomic``)."""
    target = Path(path)
    try:
        handle = directory if directory is not None else OutputDir.open_plain(target.parent)
    except OSError as exc:
        raise DiagError(
            f"cannot write {target}: {exc.strerror or exc}",
            "choose a writable location with -o PATH",
            EXIT_OUTPUT,
        ) from exc
    try:
        existing = handle.lstat(target.name)
        if existing is not None and not (
            stat.S_ISREG(existing.st_mode) or stat.S_ISLNK(existing.st_mode)
        ):
            # rename() would replace a FIFO or a device node (``-o /dev/full``) with the file.
            raise DiagError(
                f"cannot write {target}: it is {kind_of(existing.st_mode)}",
                "choose a regular file path with -o PATH",
                EXIT_OUTPUT,
            )
        handle.write_atomic(target.name, data)
    except OSError as exc:
        raise write_error(target, exc) from exc
    finally:
        if directory is None:
            handle.close()


def write_bundle(bundle: Bundle, path: Union[str, Path]) -> None:
    atomic_write_bytes(path, encode_bundle(bundle))


# How much of the journal a failing disk may keep waiting in memory before diag gives up on
# it (a day at 30 s of a large job is a few hundred MB; minutes of it fit here).
MAX_PENDING_BYTES = 64 << 20


class JournalWriter:
    """Append-only journal of a watch: header once, one fsynced line per sample.

    A write that fails (disk full, read-only, I/O error) never ends the watch: the line stays
    queued, the file is cut back to its last synced line (no torn line in the middle), and the
    queue is written again after a backoff (1 s doubling to 5 min) or at ``close``. Each failed
    attempt raises its ``DiagError`` (the caller tells the user once); ``failure`` keeps the
    first, ``complete`` says whether every line reached the disk in the end. ``close`` never
    raises: an error there must not hide the one that caused it."""

    def __init__(
        self,
        path: Union[str, Path],
        scrub: Optional[Callable[[bytes], bytes]] = None,
        directory: Optional[OutputDir] = None,
    ) -> None:
        self.path = Path(path)
        # ``scrub`` (Redactor.scrub_bytes) runs on every line last, as on every file diag writes.
        self._scrub = scrub
        # A Redactor's scrub_bytes also rescrubs the lines written before it learned a value
        # (``diag.bundle.rescrub``); ``_mark``: what it knew when they were last checked.
        self._redactor = redactor_of(scrub)
        self._mark = self._redactor.mark() if self._redactor is not None else 0
        self._directory = directory
        self._delta = DeltaState()
        self._pending: List[bytes] = []
        self._pending_bytes = 0
        self._synced = 0  # bytes on disk for sure: a failed append is cut back to here
        self._torn = False
        self._retry = Backoff()
        self.failure: Optional[DiagError] = None
        self.complete = True
        try:
            # Created anew, O_EXCL|O_NOFOLLOW, 0600: never written through a planted link.
            handle = directory if directory is not None else OutputDir.open_plain(self.path.parent)
            try:
                self._fd = handle.create(self.path.name)
            finally:
                if directory is None:
                    handle.close()
        except OSError as exc:
            raise write_error(self.path, exc) from exc

    def _append(self, obj: Any) -> None:
        if self._fd < 0:
            return
        data = _encoder.encode(obj)
        if self._scrub is not None:
            data = self._scrub(data)
        if self._pending_bytes + len(data) >= MAX_PENDING_BYTES:
            self.complete = False  # a gap would misread every later delta: the journal ends
            return
        self._pending.append(data + b"\n")
        self._pending_bytes += len(data) + 1
        if self._retry.ready():
            self._write_pending()

    def _rescrub(self) -> None:
        """The synced lines scrubbed of what the redactor learned since (see ``__init__``);
        a failed rewrite leaves them as they were, to be tried with the next write."""
        if self._redactor is None or self._fd < 0:
            return
        since, self._mark = self._mark, self._redactor.mark()
        if since == self._mark or self._synced == 0:
            return
        try:
            rewritten = rescrub_journal(
                self._fd, self._synced, self.path, self._directory, self._redactor, since
            )
        except OSError:
            self._mark = since
            return
        if rewritten is not None:
            old, (self._fd, self._synced) = self._fd, rewritten
            self._torn = False
            os.close(old)

    def _write_pending(self) -> None:
        self._rescrub()
        data = b"".join(self._pending)
        try:
            if self._torn:
                os.ftruncate(self._fd, self._synced)
                os.lseek(self._fd, self._synced, os.SEEK_SET)
                self._torn = False
            outdir.write_all(self._fd, data)
            os.fsync(self._fd)
        except OSError as exc:  # the lines already synced stay readable
            self._torn = True
            self._retry.failed()
            error = write_error(self.path, exc, "append to")
            self.failure = self.failure or error
            raise error from exc
        self._synced += len(data)
        self._pending.clear()
        self._pending_bytes = 0
        self._retry.succeeded()

    def header(
        self,
        host: HostInfo,
        target: Target,
        created_s: float,
        failures: Tuple[ProbeFailure, ...] = (),
    ) -> None:
        self._append(_Header(created_s=created_s, host=host, target=target, failures=failures))

    def sample(
        self,
        sample: Sample,
        new_processes: Tuple[ProcessInfo, ...] = (),
        new_stacks: Optional[Dict[str, Stack]] = None,
    ) -> None:
        written, unchanged = self._delta.encode(sample)
        self._append(
            _SampleLine(
                sample=written,
                processes=new_processes,
                stacks=new_stacks or {},
                unchanged=unchanged,
            )
        )
        self._delta.commit()

    def end(
        self,
        target: Optional[Target],
        verdict: Optional[Verdict],
        failures: Tuple[ProbeFailure, ...] = (),
        collectives: Tuple[RankCollectives, ...] = (),
    ) -> None:
        self._append(
            _EndLine(target=target, verdict=verdict, failures=failures, collectives=collectives)
        )

    def close(self) -> None:
        """One last try for what is queued, then sync and close; never raises (see above)."""
        if self._fd < 0:
            return
        if self._pending:
            try:
                self._write_pending()
            except DiagError:
                pass
        self._rescrub()
        fd, self._fd = self._fd, -1
        try:
            outdir.sync_and_close(fd)
        except OSError as exc:
            self.failure = self.failure or write_error(self.path, exc, "close")
            self.complete = False
        if self._pending:
            self.complete = False


def _bad(path: Path, why: str) -> DiagError:
    return DiagError(
        f"{path} is not a readable diag bundle ({why})",
        "pass the .json or .jsonl file that diag capture/watch wrote",
        EXIT_BAD_BUNDLE,
    )


def _check_version(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise DiagError(
            f"{path} has bundle schema {version}, newer than this diag understands "
            f"({SCHEMA_VERSION})",
            "upgrade diag (pipx upgrade diag)",
            EXIT_BAD_BUNDLE,
        )


def _load_journal(path: Path, data: bytes) -> Bundle:
    header: Optional[_Header] = None
    samples: List[Sample] = []
    processes: Dict[Tuple[str, int], ProcessInfo] = {}
    stacks: Dict[str, Stack] = {}
    end: Optional[_EndLine] = None
    failures: List[ProbeFailure] = []
    complete = True
    delta = DeltaState()
    records = 0
    for number, (raw, last) in enumerate(_lines(data)):
        if not raw.strip():
            continue
        try:
            line = _line_decoder.decode(raw)
        except _DECODE_ERRORS as exc:
            if last:  # a torn last line: the sample in flight
                complete = False
                break
            raise _bad(path, f"line {number + 1}: {_why(exc)}") from None
        if isinstance(line, _Header):
            header = line
            _check_version(path, header.schema_version)
            failures.extend(header.failures)
        elif isinstance(line, _SampleLine):
            samples.append(delta.decode(line.sample, line.unchanged))
            for info in line.processes:
                processes[(info.host, info.pid)] = info
            stacks.update(line.stacks)
            # Unchanged records cost a reference each, not their bytes: checked as they come,
            # a journal that repeats 10,000 tids per line is stopped at the cap, not at the end.
            records += sum(len(p.threads) for p in samples[-1].processes)
            check_budget(str(path), len(processes), records)
        else:
            end = line
            failures.extend(end.failures)
    if header is None:
        raise _bad(path, "no header line")
    target = end.target if end is not None and end.target is not None else header.target
    return Bundle(
        schema_version=header.schema_version,
        created_s=header.created_s,
        host=header.host,
        target=target,
        processes=tuple(processes.values()),
        stacks=stacks,
        samples=tuple(samples),
        failures=tuple(failures),
        verdict=end.verdict if end is not None else None,
        collectives=end.collectives if end is not None else (),
        complete=complete and end is not None,
    )


# The most ``load_bundle`` reads: a day-long watch of a large job journals a few hundred MB.
MAX_BUNDLE_BYTES = 1 << 30
# What decoding may cost, estimated on the raw bytes before anything is decoded (issue #32):
# the bytes twice (the buffer, and strings copied out of it), ~320 bytes per JSON object (a
# record of up to 30 fields) and ~96 per comma (a value: an int, a short string, its slot
# in a tuple - msgspec builds a list first). Braces and commas inside strings count too, so
# it over-counts, never under: measured, crafted files peak at or under their estimate (a
# 47 MB bundle of 10-byte thread records was 1.0 GB, a 125 MB one of 2-byte strings 2.1 GB).
# A capture of 64 threads x 8 ranks x 20 samples is ~0.1 GiB; a 64 MiB bundle (the most
# diag writes) ~0.5 GiB; a day-long watch's journal of a large job fits.
MAX_DECODE_BYTES = 2 << 30
_OBJECT_BYTES = 320
_COMMA_BYTES = 96
# What a decode may raise on hostile input: bad JSON, wrong types or out-of-range numbers,
# nesting deeper than the decoder's recursion allows.
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, OverflowError)


class _Version(msgspec.Struct):
    schema_version: Any = None


def _is_journal(data: bytes) -> bool:
    stripped = data.lstrip()
    return stripped.startswith(b"{") and b'"kind":"header"' in stripped.split(b"\n", 1)[0]


def _lines(data: bytes) -> Iterator[Tuple[bytes, bool]]:
    """Each line of ``data`` and whether it is the last one with content (one line copied at
    a time, not the whole file split at once)."""
    start, end = 0, len(data.rstrip(b"\n"))
    while start < end:
        stop = data.find(b"\n", start, end)
        stop = end if stop < 0 else stop
        yield data[start:stop], stop >= end
        start = stop + 1


def read_bundle_bytes(source: Path, max_bytes: Optional[int] = None) -> bytes:
    """The bytes of a bundle file: a regular file (a FIFO or /dev/zero is refused, not read
    forever) of at most ``max_bytes`` - refused before it is read when its size says so, and
    read no further than that if it grows; DiagError(EXIT_BAD_BUNDLE) otherwise."""
    max_bytes = MAX_BUNDLE_BYTES if max_bytes is None else max_bytes
    try:
        with open_regular(source, follow=True) as fh:
            too_big = os.fstat(fh.fileno()).st_size > max_bytes
            data = b"" if too_big else fh.read(max_bytes + 1)
    except NotRegularFile as exc:
        raise _bad(source, str(exc).replace(f"{source} is ", "it is ")) from None
    except OSError as exc:
        raise DiagError(
            f"cannot read {source}: {exc.strerror or exc}",
            "check the path of the bundle",
            EXIT_BAD_BUNDLE,
        ) from exc
    if too_big or len(data) > max_bytes:
        raise _bad(source, f"larger than the {max_bytes >> 20} MiB a bundle may be")
    return data


def decode_estimate_bytes(data: bytes) -> int:
    """What decoding ``data`` may take at most (see ``MAX_DECODE_BYTES``)."""
    return 2 * len(data) + _OBJECT_BYTES * data.count(b"{") + _COMMA_BYTES * data.count(b",")


class OverBudget(DiagError):
    """A bundle, or the bundles of one merge together, hold more than diag reads."""


def check_decode(name: str, estimate_bytes: int) -> None:
    """OverBudget (EXIT_BAD_BUNDLE) when decoding ``name`` may take more than
    ``MAX_DECODE_BYTES`` (one bundle: a merge decodes one at a time)."""
    if estimate_bytes > MAX_DECODE_BYTES:
        raise OverBudget(
            f"{name} would take ~{estimate_bytes / (1 << 30):.1f} GiB to decode, more than the "
            f"{MAX_DECODE_BYTES >> 30} GiB diag allows itself (a bound on memory)",
            "capture fewer samples or hosts per bundle, or merge fewer bundles at once",
            EXIT_BAD_BUNDLE,
        )


def load_bundle(path: Union[str, Path]) -> Bundle:
    """Load a ``.json`` bundle or a ``.jsonl`` journal; errors carry their remedy. Memory is
    bounded before anything is decoded (the size, then ``decode_estimate_bytes``) and, for a
    journal, line by line (``check_budget`` as the samples come). A merge decodes one file
    at a time (``Fold``), so the budget is each file's."""
    source = Path(path)
    data = read_bundle_bytes(source)
    check_decode(str(source), decode_estimate_bytes(data))
    return _decode(source, data)


def _decode(source: Path, data: bytes) -> Bundle:
    if _is_journal(data):
        try:
            bundle = _load_journal(source, data)
        except RecursionError:
            raise _bad(source, "nested too deeply") from None
        return _checked(source, bundle)
    try:
        version = msgspec.json.decode(data, type=_Version).schema_version
    except _DECODE_ERRORS as exc:
        raise _bad(source, f"not JSON: {_why(exc)}") from None
    if not isinstance(version, int):
        raise _bad(source, "no schema_version")
    _check_version(source, version)
    try:
        return _checked(source, _bundle_decoder.decode(data))
    except _DECODE_ERRORS as exc:
        raise _bad(source, _why(exc)) from None


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)[:200]


# Epoch seconds a real capture can carry (1970 .. year 2500): a forged 1e308 is refused here,
# not met later as an overflow while rendering.
_MAX_TIME_S = 16_725_225_600.0


# What one bundle (or all the bundles of one merge) may hold for report and merge: a crafted
# 45 MB bundle of 200,000 processes made ``report`` use 1.9 GiB and ``merge`` 4 GiB over two
# minutes (issue #25). A real day-long watch of 8 ranks x 64 threads at 30 s holds 1.5 million
# thread records; a 1,024-node job of 8 ranks and their workers, tens of thousands of processes.
# A merge counts the thread records it holds: equal ones are held once (``diag.bundle.intern``).
MAX_PROCESSES = 100_000
MAX_THREAD_RECORDS = 20_000_000


def check_budget(name: str, processes: int, thread_records: int) -> None:
    """DiagError(EXIT_BAD_BUNDLE) when ``name`` holds more than the caps above."""
    for count, cap, what in (
        (processes, MAX_PROCESSES, "processes"),
        (thread_records, MAX_THREAD_RECORDS, "thread records (threads x samples)"),
    ):
        if count > cap:
            raise OverBudget(
                f"{name} holds {count:,} {what}, more than the {cap:,} {what.split()[0]} "
                "diag reads (a bound on memory and time)",
                "capture fewer samples or hosts per bundle, or merge fewer bundles at once",
                EXIT_BAD_BUNDLE,
            )


def thread_records(bundle: Bundle) -> int:
    return sum(len(p.threads) for s in bundle.samples for p in s.processes)


def _checked(source: Path, bundle: Bundle) -> Bundle:
    check_budget(str(source), len(bundle.processes), thread_records(bundle))
    times = [bundle.created_s, *(s.t_s for s in bundle.samples)]
    times += [s.duration_s for s in bundle.samples]
    times += [p.t_s for s in bundle.samples for p in s.processes]
    for value in times:
        if not -_MAX_TIME_S <= value <= _MAX_TIME_S:  # also False for NaN
            raise _bad(source, f"a time of {value!r} seconds is out of range")
    return bundle
