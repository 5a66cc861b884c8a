"""Reports: bundle → view-model (build) → HTML, Markdown and terminal text.

``build_view`` decides everything a report shows; ``render_html``, ``render_markdown`` and
``render_summary`` only format it (jinja2 templates in ``report_templates/``);
``diag.render.outputs`` writes the files beside a bundle. The renderer is handed its verdict
(on the bundle): it may import only the base (``model``, ``bundle``, ``frames``, ``text``,
``redact``) - never ``verdict``, ``collect`` or ``probes``.
"""

from __future__ import annotations

from diag.render.build import build_view
from diag.render.html import render_html
from diag.render.markdown import render_markdown
from diag.render.terminal import render_summary

__all__ = ["build_view", "render_html", "render_markdown", "render_summary"]
