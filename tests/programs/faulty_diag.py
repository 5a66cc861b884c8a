"""Run diag's real CLI with one write point failing, to prove the job outlives it (issue #25).

Usage: ``faulty_diag.py POINT ERRNO TIMES -- diag args...``. ``POINT`` is where the OSError is
injected: ``journal``, ``json``, ``html``, ``md``, ``log`` (the write function
``diag.bundle.outdir.write_all``, for the file of that kind), ``journal-close`` (the journal's
final sync and close) or ``render`` (the HTML renderer raises a plain bug, not an OSError).
``ERRNO`` is a name from ``errno`` (ENOSPC, EROFS, EIO); ``TIMES`` how many writes fail
(-1: every one). Everything else is diag unchanged, in this process.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any

point, code_name, times_text = sys.argv[1:4]
args = sys.argv[sys.argv.index("--") + 1 :]
code = getattr(errno, code_name)
left = [int(times_text)]

from diag.bundle import outdir  # noqa: E402
from diag.render import outputs  # noqa: E402

_SUFFIX = {"journal": ".jsonl", "json": ".json", "html": ".html", "md": ".md", "log": ".log"}


def _kind(fd: int) -> str:
    """``.html`` for run.html and for its temporary ``.run.html.<random>.tmp``."""
    name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).removesuffix(" (deleted)")
    if name.startswith(".") and name.endswith(".tmp"):
        name = name[1:].rsplit(".", 2)[0]
    return os.path.splitext(name)[1]


def _fail_now() -> bool:
    if left[0] == 0:
        return False
    left[0] -= 1
    return True


real_write_all = outdir.write_all
real_sync_and_close = outdir.sync_and_close
real_render_html = outputs.render_html


def write_all(fd: int, data: bytes) -> None:
    if point in _SUFFIX and _kind(fd) == _SUFFIX[point] and _fail_now():
        raise OSError(code, os.strerror(code))
    real_write_all(fd, data)


def sync_and_close(fd: int) -> None:
    if point == "journal-close" and _kind(fd) == ".jsonl" and _fail_now():
        os.close(fd)
        raise OSError(code, os.strerror(code))
    real_sync_and_close(fd)


def render_html(view: Any) -> str:
    if point == "render" and _fail_now():
        raise RuntimeError("a bug in the renderer")
    return real_render_html(view)


outdir.write_all = write_all  # type: ignore[assignment]
outdir.sync_and_close = sync_and_close  # type: ignore[assignment]
outputs.render_html = render_html  # type: ignore[assignment]

from diag.cli import main  # noqa: E402

main(args)
