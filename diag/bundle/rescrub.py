"""Scrub again what was written before a secret was learned: the journal of a watch.

A job can print a secret before the process that carries it appears (a launcher logs the
token it is about to hand to a worker): diag writes that sample's journal line scrubbed with
what it knew then, and learns the value one sample later from the worker's environment. The
final files are scrubbed with everything learned; the journal, written as it goes, would keep
the value. So when the redactor has learned something since the journal's lines were
written, those lines are searched for just the new values (cheap: a substring search of the
synced bytes), and only if one is there the journal is rewritten scrubbed - to a new file in
the same directory handle, synced and renamed over it, so a crash leaves either the old
journal or the whole new one, never a torn mix.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Callable, Optional, Protocol, Tuple

from diag.bundle import outdir
from diag.bundle.outdir import OutputDir


class Rescrubber(Protocol):
    """``diag.redaction.redact.Redactor`` as seen from here (the bundle may not import the
    redactor): ``redactor_of`` finds it behind the ``scrub`` callable a writer was given."""

    def mark(self) -> int: ...

    def learned_since(self, since: int) -> Tuple[bytes, ...]: ...

    def scrub_bytes(self, data: bytes) -> bytes: ...


def redactor_of(scrub: Optional[Callable[[bytes], bytes]]) -> Optional[Rescrubber]:
    """The redactor whose ``scrub_bytes`` ``scrub`` is, if it can rescrub; else None."""
    owner = getattr(scrub, "__self__", None)
    if owner is None or not all(hasattr(owner, a) for a in ("mark", "learned_since")):
        return None
    found: Rescrubber = owner
    return found


def rescrub_journal(
    fd: int,
    synced: int,
    path: Path,
    directory: Optional[OutputDir],
    redactor: Rescrubber,
    since: int,
) -> Optional[Tuple[int, int]]:
    """Rewrite the first ``synced`` bytes of the journal open as ``fd`` if a value learned
    after ``since`` is in them: (the new file's fd, its size), or None when nothing had to
    change. OSError when the rewrite failed (the old journal is then untouched)."""
    fresh = redactor.learned_since(since)
    if not fresh:
        return None
    reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)  # the same file
    try:
        if not _holds_any(reader, synced, fresh):
            return None  # the common case: read in chunks, nothing kept in memory
        handle = directory if directory is not None else OutputDir.open_plain(path.parent)
        tmp = f".{path.name[:200]}.{secrets.token_hex(4)}.rescrub"
        try:
            new_fd = handle.create(tmp)
            try:
                size = _scrub_into(reader, synced, redactor, new_fd)
                os.fsync(new_fd)
                os.rename(tmp, path.name, src_dir_fd=handle.fd, dst_dir_fd=handle.fd)
            except BaseException:
                os.close(new_fd)
                handle.unlink(tmp)
                raise
        finally:
            if directory is None:
                handle.close()
    finally:
        os.close(reader)
    return new_fd, size


def _scrub_into(reader: int, size: int, redactor: Rescrubber, out: int) -> int:
    """Scrub the first ``size`` bytes of ``reader`` into ``out`` a whole number of lines at a
    time (journal lines are independent JSON documents), never the whole journal in memory: a
    multi-day journal read at once would cost the host - and the job beside diag - its size
    twice over. A line longer than ``_CARRY_MAX`` is scrubbed in pieces. Bytes written."""
    offset = written = 0
    carry = b""
    while offset < size:
        chunk = os.pread(reader, min(size - offset, _CHUNK), offset)
        if not chunk:
            break
        offset += len(chunk)
        data = carry + chunk
        cut = len(data) if offset >= size else data.rfind(b"\n") + 1
        if cut == 0 and len(data) < _CARRY_MAX:
            carry = data
            continue
        cut = cut or len(data)
        part, carry = data[:cut], data[cut:]
        scrubbed = redactor.scrub_bytes(part)
        outdir.write_all(out, scrubbed)
        written += len(scrubbed)
    if carry:
        scrubbed = redactor.scrub_bytes(carry)
        outdir.write_all(out, scrubbed)
        written += len(scrubbed)
    return written


_CHUNK = 1 << 24
_CARRY_MAX = 4 * _CHUNK  # one journal line this long is scrubbed in pieces


def _holds_any(fd: int, size: int, values: Tuple[bytes, ...]) -> bool:
    """Whether the first ``size`` bytes of ``fd`` hold one of ``values``, read 16 MiB at a
    time (each chunk overlapping the last by the longest value, so none is missed)."""
    overlap = max(len(v) for v in values) - 1
    offset, tail = 0, b""
    while offset < size:
        chunk = os.pread(fd, min(size - offset, _CHUNK), offset)
        if not chunk:
            return False
        window = tail + chunk
        if any(v in window for v in values):
            return True
        tail = window[-overlap:] if overlap else b""
        offset += len(chunk)
    return False
