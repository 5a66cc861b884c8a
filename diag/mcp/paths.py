"""Where the MCP server's captures go, and the files its tools are given (issue #32).

The server runs as root and is driven by an agent; the host has other users. So:

* **its default output directory is new and private**: a random name made with ``mkdir(0700)``
  relative to the handle of a checked base (``$XDG_RUNTIME_DIR`` when it is private to this
  user, else the temporary directory, else ``/tmp``), then opened ``O_NOFOLLOW`` and checked on
  that handle (owner, mode). The old fixed name (``$TMPDIR/diag-mcp-<uid>``) let anyone plant a
  symlink there, and root's captures land where they pointed, or squat it and make every
  capture fail; nothing at a guessable name is ever used now, and a base that fails the check
  is skipped for the next one, never a failure;
* **every capture has its own report name** (time, pid and a random part), so two captures of
  one job at once never answer with the same files;
* **a path an agent hands over is checked before any child reads it**: opened
  ``O_NONBLOCK`` and ``fstat``'d, so a FIFO or a device is refused at once, in one line, and a
  file over the size a bundle may have is refused before anything parses it.
"""

from __future__ import annotations

import os
import secrets
import stat
import tempfile
import time
from pathlib import Path
from typing import Iterator, List, Optional

from diag.bundle.files import open_regular
from diag.bundle.outdir import OutputDir
from diag.errors import EXIT_OUTPUT, DiagError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PREFIX = "diag-mcp-"
_MAX_TRIES = 16


def private_dir_ok(fd: int) -> bool:
    """The open directory ``fd`` is this user's own and nobody else may write it: owned by the
    effective uid, no group or other write bit (checked on the handle, not on a path)."""
    st = os.fstat(fd)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _runtime_dir() -> Optional[str]:
    """``$XDG_RUNTIME_DIR`` when it is this user's private directory (0700, not a link)."""
    path = os.environ.get("XDG_RUNTIME_DIR", "")
    if not os.path.isabs(path):
        return None
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        return path if st.st_uid == os.geteuid() and not st.st_mode & 0o077 else None
    finally:
        os.close(fd)


def _bases() -> Iterator[str]:
    seen: List[str] = []
    for base in (_runtime_dir(), tempfile.gettempdir(), "/tmp"):
        if base and base not in seen:
            seen.append(base)
            yield base


def _make_in(base: OutputDir) -> Optional[str]:
    """A new directory of a random name in ``base`` (by handle), checked; None if none could
    be made there."""
    for _ in range(_MAX_TRIES):
        name = f"{_PREFIX}{os.geteuid()}-{secrets.token_hex(8)}"
        try:
            os.mkdir(name, 0o700, dir_fd=base.fd)
        except FileExistsError:
            continue
        except OSError:
            return None
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=base.fd)
        except OSError:
            return None
        try:
            if private_dir_ok(fd):
                return name
        finally:
            os.close(fd)
        return None
    return None


def fresh_private_dir() -> Path:
    """A new private directory for this server's captures (see the module doc): the first
    base whose whole path passes diag's output checks (``OutputDir.open``) and in which a
    fresh 0700 directory could be made and verified."""
    reasons: List[str] = []
    for base in _bases():
        try:
            handle = OutputDir.open(base)
        except DiagError as exc:
            reasons.append(exc.one_line())
            continue
        with handle:
            name = _make_in(handle)
        if name is not None:
            return Path(base) / name
        reasons.append(f"{base}: no private directory could be made there")
    raise DiagError(
        "no private directory for the MCP server's reports: " + "; ".join(reasons),
        "start diag mcp with --out-dir DIR (a directory only root or you can change)",
        EXIT_OUTPUT,
    )


def ensure_out_dir(path: Path) -> None:
    """``--out-dir``, made if missing (0700) by a ``mkdir`` relative to the checked handle of
    its parent, never through a link or in a directory someone else controls; an existing one
    passes the same whole-path check a capture's ``-o`` does. DiagError(EXIT_OUTPUT) else."""
    with OutputDir.open(path.parent, str(path)) as parent:
        try:
            os.mkdir(path.name, 0o700, dir_fd=parent.fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise DiagError(
                f"cannot make {path}: {exc.strerror or exc}",
                "start diag mcp with --out-dir DIR (a directory only root or you can change)",
                EXIT_OUTPUT,
            ) from exc
    OutputDir.open(path).close()


def report_base(out_dir: Path, pid: int) -> Path:
    """The ``-o`` of one capture: its own name whoever else captures the same job now."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return out_dir / f"diag-{pid}-{stamp}-{secrets.token_hex(4)}"


def checked_file(path: Path) -> int:
    """The size of the regular file at ``path`` (a link the agent names is followed, as a user
    would), opened without blocking; ``NotRegularFile``/``OSError`` otherwise, at once."""
    with open_regular(path, follow=True) as fh:
        return os.fstat(fh.fileno()).st_size
