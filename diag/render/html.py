"""ReportView → one self-contained HTML file (jinja2, autoescape on, CSS inline, no scripts).

Templates are read through importlib.resources from the ``diag.report_templates`` package, so
a wheel or pipx install renders without the source tree. Autoescaping is forced on for every
template: log lines, thread names and argv are attacker-controlled text.
"""

from __future__ import annotations

import importlib.resources
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


def environment() -> jinja2.Environment:
    """The one jinja2 environment of this process; templates compile in memory, once.

    No bytecode cache on disk, on purpose (issue #32): jinja2 unpickles a cache file and
    ``exec``s its code, so a cache anywhere another user can write - the ``~/.cache`` of the
    user ``sudo`` came from, an ``$XDG_CACHE_HOME`` someone passed, a link planted in either -
    would be code that root runs. Compiling the report template costs ~0.2 s, paid while a
    capture waits between samples (``render.outputs.warm_templates``)."""
    global _env
    if _env is None:
        _env = jinja2.Environment(
            loader=jinja2.FunctionLoader(_load),
            undefined=jinja2.StrictUndefined,
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
