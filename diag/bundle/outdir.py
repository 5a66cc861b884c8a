"""diag's output directory: checked whole, opened once, and written by handle (issue #25).

Why: diag runs as root and writes where ``-o`` points, often into shared trees. Checking only
the last directory, once, and then writing by path lets anyone who can write a directory
*above* it (a world-writable ``ww`` in ``ww/sub/run``) swap ``sub`` for a symlink mid-watch, or
point a symlink they own (``pub/reports``) anywhere root can write. So:

* **the whole path is walked by handle** (``open_checked``): from ``/``, each component is
  opened ``O_DIRECTORY|O_NOFOLLOW`` relative to the one before and checked on the open handle
  (``fstat``), so what is checked is what is used. Every directory must be owned by root or by
  the user running diag, and none may be world-writable without the sticky bit. A symlink on
  the way is followed only if root or the user owns it (its target is walked the same way);
* **every file is created relative to that one handle** (``os.open(name, dir_fd=...)``) for
  the life of a watch, and renamed within it, so swapping a directory on the path afterwards
  changes nothing: diag keeps writing into the directory it checked (or gets an error if that
  directory was removed), never into wherever a new link points.

The write primitives (``write_all``, ``sync_and_close``) are module functions on purpose: they
are the one seam every output byte passes, where the fault tests inject ENOSPC, EROFS and EIO.
"""

from __future__ import annotations

import os
import secrets
import stat
import time
from pathlib import Path
from typing import List, Optional, Union

from diag.bundle.files import NotRegularFile, kind_of
from diag.errors import EXIT_OUTPUT, DiagError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_MAX_LINKS = 40  # the kernel's own limit on symlinks followed in one lookup (ELOOP)
_DEVICE_DIRS = ("/dev", "/proc", "/sys")
_REMEDY = "choose a directory that only root or you can change, with -o PATH"


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (a short write is continued, an error raised)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def sync_and_close(fd: int) -> None:
    """fsync then close ``fd``: a file diag finished must be on disk; it is closed either way."""
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Backoff:
    """When to try a failing write again: 1 s after the first failure, doubling to 5 min.

    A disk that fills for a second (a checkpoint) must cost the watch nothing, and one that
    stays full must not cost a failed write (and an error) every sample of a day."""

    FIRST_S = 1.0
    MAX_S = 300.0

    def __init__(self) -> None:
        self._delay_s = 0.0
        self._next = 0.0

    def ready(self) -> bool:
        return time.monotonic() >= self._next

    def failed(self) -> None:
        self._delay_s = min(max(self._delay_s * 2, self.FIRST_S), self.MAX_S)
        self._next = time.monotonic() + self._delay_s

    def succeeded(self) -> None:
        self._delay_s = 0.0
        self._next = 0.0


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def _refuse(shown: str, why: str) -> DiagError:
    return DiagError(f"cannot write {shown}: {why}", _REMEDY, EXIT_OUTPUT)


def _check_dir(st: os.stat_result, where: str, shown: str) -> None:
    if st.st_uid not in (0, os.getuid()):
        raise _refuse(shown, f"directory {where} is owned by {_owner(st.st_uid)}, not root or you")
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        # Anyone may rename or replace what is in it, between a check and a write.
        raise _refuse(shown, f"directory {where} is world-writable without the sticky bit")


def _walk(path: str, shown: str) -> int:
    """The fd of directory ``path``, reached one checked component at a time from ``/``."""
    todo = [p for p in reversed(os.path.join(os.getcwd(), path).split("/")) if p]
    stack: List[int] = [os.open("/", _DIR_FLAGS)]
    where: List[str] = []
    links = 0
    try:
        _check_dir(os.fstat(stack[0]), "/", shown)
        while todo:
            name = todo.pop()
            if name == ".":
                continue
            if name == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                    where.pop()
                continue
            here = "/" + "/".join([*where, name])
            st = os.stat(name, dir_fd=stack[-1], follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                if st.st_uid not in (0, os.getuid()):
                    raise _refuse(shown, f"{here} is a symlink owned by {_owner(st.st_uid)}")
                links += 1
                if links > _MAX_LINKS:
                    raise _refuse(shown, f"too many symlinks at {here}")
                target = os.readlink(name, dir_fd=stack[-1])
                if target.startswith("/"):
                    while len(stack) > 1:
                        os.close(stack.pop())
                    where.clear()
                todo.extend(p for p in reversed(target.split("/")) if p)
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise _refuse(shown, f"{here} is {kind_of(st.st_mode)}, not a directory")
            fd = os.open(name, _DIR_FLAGS, dir_fd=stack[-1])  # a link swapped in now: ELOOP
            stack.append(fd)
            where.append(name)
            _check_dir(os.fstat(fd), here, shown)
    except BaseException:
        for fd in stack:
            os.close(fd)
        raise
    for fd in stack[:-1]:
        os.close(fd)
    return stack[-1]


class OutputDir:
    """One open directory handle; every file diag writes there is created relative to it."""

    def __init__(self, fd: int, shown: Path) -> None:
        self.fd = fd
        self.shown = shown  # the path as the user gave it: for messages only, never opened

    @classmethod
    def open(cls, path: Union[str, Path], shown: Optional[str] = None) -> OutputDir:
        """The checked directory ``path`` (see the module doc); DiagError(EXIT_OUTPUT) with
        the component at fault otherwise."""
        directory = str(path) or "."
        label = shown or directory
        try:
            fd = _walk(directory, label)
        except OSError as exc:
            raise DiagError(
                f"cannot write {label}: directory {directory}: {exc.strerror or exc}",
                "choose an existing, writable directory with -o PATH",
                EXIT_OUTPUT,
            ) from exc
        real = os.readlink(f"/proc/self/fd/{fd}")
        if any(real == d or real.startswith(d + "/") for d in _DEVICE_DIRS):
            os.close(fd)
            raise _refuse(label, f"{directory} holds devices or kernel files, not reports")
        if not os.access(f"/proc/self/fd/{fd}", os.W_OK | os.X_OK):
            os.close(fd)
            raise DiagError(
                f"cannot write {label}: directory {directory} is not writable",
                "choose a writable location with -o PATH",
                EXIT_OUTPUT,
            )
        return cls(fd, Path(directory))

    @classmethod
    def open_plain(cls, path: Union[str, Path]) -> OutputDir:
        """``path`` opened as a handle without the ownership walk (``diag report`` writing
        beside a bundle, and direct library callers); OSError as ``os.open`` raises it."""
        directory = str(path) or "."
        return cls(os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), Path(path))

    def path(self, name: str) -> Path:
        return self.shown / name

    def lstat(self, name: str) -> Optional[os.stat_result]:
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def unlink(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass

    def create(self, name: str, mode: int = 0o600) -> int:
        """A new file ``name`` (fd, write-only), never through a link: a regular file or
        symlink there is unlinked first (the name itself), then created O_EXCL|O_NOFOLLOW."""
        st = self.lstat(name)
        if st is not None:
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                raise NotRegularFile(f"{self.path(name)} is {kind_of(st.st_mode)}")
            self.unlink(name)
        fd = os.open(name, _CREATE_FLAGS, mode, dir_fd=self.fd)
        try:
            os.fchmod(fd, mode)  # the umask may have narrowed it; never widened
        except BaseException:
            os.close(fd)
            raise
        return fd

    def reopen(self, name: str, flags: int) -> int:
        """Another fd of ``name`` in this directory (never through a link)."""
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)

    def write_atomic(self, name: str, data: bytes) -> None:
        """``name`` is always either the old file or the whole new one: a temporary file
        created O_EXCL in this directory, synced, renamed over ``name`` within the handle
        (rename replaces a symlink there, never follows it). OSError on failure."""
        st = self.lstat(name)
        if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            # rename() would replace a FIFO or a device node with the file.
            raise NotRegularFile(f"{self.path(name)} is {kind_of(st.st_mode)}")
        tmp = f".{name[:200]}.{secrets.token_hex(4)}.tmp"  # within NAME_MAX whatever the name
        fd = os.open(tmp, _CREATE_FLAGS, 0o600, dir_fd=self.fd)
        try:
            try:
                write_all(fd, data)
            except BaseException:
                os.close(fd)  # the write's error is the one to report, not a close's
                raise
            sync_and_close(fd)
            os.rename(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=self.fd)
            except OSError:
                pass
            raise

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> OutputDir:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
