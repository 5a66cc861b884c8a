"""Where diag's outputs go, checked writable before any sampling starts.

A capture can run for minutes and a watch for days; finding out at the end that ``-o`` named
a missing or read-only directory would lose all of it. So every command resolves its output
paths first, through the same check and the same ``EXIT_OUTPUT`` error with its remedy:
capture and merge write ``PATH.json`` (+ .html, .md beside it), a watch writes a family of
files under one base path (``PATH.html``, ``.md``, ``.json``, ``.jsonl``, ``.log``).
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path
from typing import NamedTuple, Optional, Union

from diag.bundle.files import kind_of
from diag.bundle.outdir import OutputDir
from diag.errors import EXIT_OUTPUT, DiagError

_KNOWN_SUFFIXES = (".html", ".json", ".jsonl", ".md", ".log")


def _default_name(stem: str, now_s: Optional[float]) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now_s))
    return f"diag-{stem}-{stamp}"


def _require_writable_dir(path: Path, shown: str) -> None:
    """The whole path to ``path``'s directory passes ``OutputDir.open``'s checks (every
    component owned by root or you, none world-writable without the sticky bit, no symlink
    owned by anyone else, not under /dev, /proc, /sys), walked by handle."""
    OutputDir.open(path.parent if str(path.parent) else Path("."), shown).close()


def _require_file_path(path: Path) -> None:
    """``path`` is a regular file or not there yet: a FIFO, device or directory is refused."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise DiagError(
            f"cannot write {path}: it is {kind_of(mode)}",
            "choose a regular file path with -o PATH",
            EXIT_OUTPUT,
        )


def json_output_path(
    out: Optional[str], stem: Union[int, str], now_s: Optional[float] = None
) -> Path:
    """``-o PATH`` with its suffix replaced by .json, or ``diag-<stem>-<time>.json`` in cwd
    (the stem is the PID, ``merged`` or ``slurm-<job>``)."""
    if out:
        path = Path(out).with_suffix(".json")
    else:
        path = Path.cwd() / f"{_default_name(str(stem), now_s)}.json"
    _require_writable_dir(path, str(path))
    _require_file_path(path)
    if path.exists() and not os.access(path, os.W_OK):
        raise DiagError(
            f"cannot write {path}: file is not writable",
            "choose another location with -o PATH",
            EXIT_OUTPUT,
        )
    return path


class Outputs(NamedTuple):
    """The base path of a watch's files (``with_ext(".html")`` is one of them) and the handle
    of their directory, opened once and checked, that every one of them is written through."""

    base: Path
    directory: Optional[OutputDir] = None

    def with_ext(self, ext: str) -> Path:
        return self.base.parent / f"{self.base.name}{ext}"

    def name(self, ext: str) -> str:
        """The file name of ``with_ext(ext)``, relative to ``directory``."""
        return f"{self.base.name}{ext}"


def output_base(out: Optional[str], name: str, now_s: Optional[float] = None) -> Outputs:
    """``-o PATH[.html|.json|...]`` without its suffix, or ``diag-<name>-<time>`` in cwd, with
    its directory open (the caller closes ``directory``)."""
    if out:
        path = Path(out)
        base = path.with_suffix("") if path.suffix in _KNOWN_SUFFIXES else path
    else:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:40] or "job"
        base = Path.cwd() / _default_name(slug, now_s)
    directory = OutputDir.open(base.parent if str(base.parent) else Path("."), f"{base}.*")
    try:
        for ext in _KNOWN_SUFFIXES:
            _require_file_path(base.parent / f"{base.name}{ext}")
    except BaseException:
        directory.close()
        raise
    return Outputs(base, directory)
