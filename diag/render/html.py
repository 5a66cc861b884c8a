"""ReportView → one self-contained HTML file (jinja2, autoescape on, CSS inline, no scripts).

Templates are read through importlib.resources from the ``diag.report_templates`` package, so
a wheel or pipx install renders without the source tree. Autoescaping is forced on for every
template: log lines, thread names and argv are attacker-controlled text.
"""

from __future__ import annotations

import importlib.resources
from typing import Callable, Optional, Tuple

import jinja2

from diag.render.view import ReportView

_PACKAGE = "diag.report_templates"
_env: Optional[jinja2.Environment] = None


def _load(name: str) -> Optional[Tuple[str, Optional[str], Optional[Callable[[], bool]]]]:
    resource = importlib.resources.files(_PACKAGE).joinpath(name)
    if not resource.is_file():
        return None
    return resource.read_text(encoding="utf-8"), None, lambda: True


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
    return _env


def render_html(view: ReportView) -> str:
    template = environment().get_template("report.html.j2")
    return template.render(v=view)
