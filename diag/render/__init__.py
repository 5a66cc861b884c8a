"""Reports: bundle → view-model (build) → HTML, Markdown and terminal text.

``build_view`` decides everything a report shows; ``render_html``, ``render_markdown`` and
``render_summary`` only format it. ``diag.render.outputs`` writes the files beside a bundle.
"""

from __future__ import annotations

from diag.render.build import build_view
from diag.render.html import render_html
from diag.render.markdown import render_markdown
from diag.render.terminal import render_summary

__all__ = ["build_view", "render_html", "render_markdown", "render_summary"]
