"""ReportView → one self-contained HTML file (jinja2, autoescape on, CSS inline, no scripts).

Templates are read through importlib.resources from the ``diag.report_templates`` package, so
a wheel or pipx install renders without the source tree. Autoescaping is forced on for every
template: log lines, thread names and argv are attacker-controlled text.
"""

from __future__ import annotations

import importlib.resources
import os
import re
from typing import Callable, Optional, Tuple

import jinja2
from markupsafe import Markup, escape

from diag.render.view import ReportView
from diag.text.terminal import safe_text

_PACKAGE = "diag.report_templates"
_CODE_SPAN = re.compile(r"`([^`]+)`")
_env: Optional[jinja2.Environment] = None


def _load(name: str) -> Optional[Tuple[str, Optional[str], Optional[Callable[[], bool]]]]:
    resource = importlib.resources.files(_PACKAGE).joinpath(name)
    if not resource.is_file():
        return None
    return resource.read_text(encoding="utf-8"), None, lambda: True


def code_spans(text: str) -> Markup:
    """Escape ``text`` and show its `backticked` parts as <code>: verdict text uses Markdown."""
    parts = _CODE_SPAN.split(text)
    out = [escape(p) if i % 2 == 0 else Markup("<code>%s</code>") % p for i, p in enumerate(parts)]
    return Markup("").join(out)


# Part of the cache key: compiled code depends on these as much as on the source.
_OPTIONS = "autoescape=True trim_blocks=False keep_trailing_newline=True StrictUndefined"


class _BytecodeCache(jinja2.FileSystemBytecodeCache):
    """Compiling the report template took ~0.2 s of every ``diag capture`` (bench/cli_cost.py);
    its compiled code is cached per user. The key covers the template source, the jinja2
    version (jinja2 checks that) and our options; a cache that cannot be written is skipped."""

    def get_source_checksum(self, source: str) -> str:
        return super().get_source_checksum(f"{_OPTIONS}\n{source}")

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> Optional[jinja2.BytecodeCache]:
    """``$XDG_CACHE_HOME/diag/jinja2`` (or ~/.cache), private to this user, else no cache."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "diag", "jinja2")
    existing = path
    while not os.path.exists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    try:
        if os.stat(existing).st_uid != os.getuid():
            return None  # `sudo diag` with the user's HOME: leave no root-owned files there
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None  # someone else could plant code there
    return _BytecodeCache(path)


def environment() -> jinja2.Environment:
    global _env
    if _env is None:
        _env = jinja2.Environment(
            loader=jinja2.FunctionLoader(_load),
            undefined=jinja2.StrictUndefined,
            bytecode_cache=_bytecode_cache(),
            autoescape=True,
            trim_blocks=False,
            keep_trailing_newline=True,
        )
        _env.filters["code"] = code_spans
    return _env


def render_html(view: ReportView) -> str:
    """The report page. Autoescaping stops markup, not control characters: an escape sequence
    in an environment value or a thread name would reach the file raw (and the terminal of
    whoever ``cat``s or ``grep``s it, or a bidi override reorder what a reader sees). So the
    whole page, template text included, passes ``safe_text``: every control character (but
    newline and tab), C1, bidi control and lone surrogate is written as a visible ``\\xNN``."""
    template = environment().get_template("report.html.j2")
    return safe_text(template.render(v=view))
