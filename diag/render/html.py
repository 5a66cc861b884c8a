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
    global _env
    if _env is None:
        _env = jinja2.Environment(
            loader=jinja2.FunctionLoader(_load),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=False,
            keep_trailing_newline=True,
        )
        _env.filters["code"] = code_spans
    return _env


def render_html(view: ReportView) -> str:
    template = environment().get_template("report.html.j2")
    return template.render(v=view)
