"""Opening files a hostile target may have planted, and creating diag's own files safely.

diag runs as root against jobs whose users can write the paths diag reads (their logs, their
Flight Recorder dumps, a bundle handed over for ``diag report``) and the directories diag
writes to. So every read of such a file goes through ``open_regular``: the last component is
not followed if it is a symlink (``O_NOFOLLOW``), the open does not block on a FIFO
(``O_NONBLOCK``), and the opened file must be a regular file (``fstat``) - a FIFO, a device
(``/dev/zero``), a directory or a socket is refused with a one-line reason. ``read_capped``
reads at most a byte budget (the tail when asked), never "to EOF" (a size of 0 proves nothing).

Every file diag creates goes through ``create_private``: ``O_CREAT | O_EXCL | O_NOFOLLOW``,
mode 0600, so a symlink or hard link planted at the path is never written through (an existing
regular file is unlinked first - the name, not what a link points to - and created anew).
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO, Tuple, Union

PathLike = Union[str, "os.PathLike[str]"]

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK_BYTES = 1 << 20


class NotRegularFile(OSError):
    """A path that is not a plain file (FIFO, device, directory, symlink, socket)."""


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words ("a FIFO", "a character device"...)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


def check_regular_path(path: PathLike) -> None:
    """Raise ``NotRegularFile`` unless ``path`` (followed, as a user names it) is a regular
    file; OSError (e.g. ENOENT) as ``os.stat`` raises it."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(f"{os.fspath(path)} is {kind_of(st.st_mode)}, not a regular file")


def open_regular(path: PathLike, follow: bool = False) -> BinaryIO:
    """``path`` opened for reading if it is a regular file and not a symlink (``follow``: a
    symlink the user named is followed, the file it names must still be regular); else
    ``NotRegularFile`` (an ``OSError``) with the reason."""
    flags = _READ_FLAGS & ~os.O_NOFOLLOW if follow else _READ_FLAGS
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: the last component is a symlink (O_NOFOLLOW)
            raise NotRegularFile(f"{os.fspath(path)} is a symlink; not followed") from exc
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{os.fspath(path)} is {kind_of(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_capped(fh: BinaryIO, max_bytes: int, tail: bool = False) -> Tuple[bytes, bool]:
    """At most ``max_bytes`` of an opened file (its last ones when ``tail``) and whether the
    file held more. Reads in chunks and stops at the budget whatever the size said."""
    size = os.fstat(fh.fileno()).st_size
    if tail and size > max_bytes:
        fh.seek(size - max_bytes)
    parts = []
    got = 0
    while got <= max_bytes:
        chunk = fh.read(min(_CHUNK_BYTES, max_bytes + 1 - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    data = b"".join(parts)
    truncated = len(data) > max_bytes or size > max_bytes
    return data[:max_bytes], truncated


def read_regular(path: PathLike, max_bytes: int, tail: bool = False) -> Tuple[bytes, bool]:
    """``open_regular`` + ``read_capped``: (bytes, truncated)."""
    with open_regular(path) as fh:
        return read_capped(fh, max_bytes, tail)


def create_private(path: PathLike, mode: int = 0o600) -> BinaryIO:
    """A new file at ``path`` for writing, never through a link: an existing regular file or
    symlink there is removed (the name itself) and the file created ``O_EXCL``, mode 0600.
    A directory, FIFO or device at the path raises ``NotRegularFile``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise NotRegularFile(f"{os.fspath(path)} is {kind_of(st.st_mode)}, not a regular file")
        os.unlink(path)
    fd = os.open(path, _CREATE_FLAGS, mode)
    try:
        os.fchmod(fd, mode)  # the umask may have narrowed it; never widened
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise
