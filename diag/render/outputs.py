"""Write the HTML report and the Markdown summary of a bundle, scrubbed, atomically.

The one path every report file takes (``diag capture``, ``diag watch``, ``diag merge`` through
``capture.write_outputs``, and ``diag report``): render, pass the bytes through the capture's
``Redactor.scrub_bytes`` as a last line of defence (a secret that slipped into a thread name
or a log line the probes missed), then ``atomic_write_bytes`` so a reader or a crash never
sees half a report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple, Union

from diag.bundle_io import atomic_write_bytes
from diag.model import Bundle
from diag.redact import Redactor
from diag.render.build import build_view, resolve_verdict
from diag.render.html import render_html
from diag.render.markdown import render_markdown
from diag.render.view import ReportView


def view_of(bundle: Bundle) -> ReportView:
    verdict, source = resolve_verdict(bundle)
    return build_view(bundle, verdict, source)


def report_paths(base: Union[str, Path]) -> Tuple[Path, Path]:
    """``run.json`` / ``run.jsonl`` / ``run.html`` → (``run.html``, ``run.md``)."""
    path = Path(base)
    if path.suffix in (".json", ".jsonl", ".html", ".md"):
        path = path.with_suffix("")
    return path.with_name(path.name + ".html"), path.with_name(path.name + ".md")


def write_reports(
    bundle: Bundle,
    base: Union[str, Path],
    redactor: Optional[Redactor] = None,
    html_path: Optional[Union[str, Path]] = None,
) -> Tuple[Path, Path]:
    """Write PATH.html and PATH.md beside ``base`` (or the HTML at ``html_path``)."""
    scrub = redactor if redactor is not None else Redactor()
    for info in bundle.processes:
        scrub.add_environ(dict(info.env))
    html_out, md_out = report_paths(html_path if html_path is not None else base)
    view = view_of(bundle)
    atomic_write_bytes(html_out, scrub.scrub_bytes(render_html(view).encode("utf-8")))
    atomic_write_bytes(md_out, scrub.scrub_bytes(render_markdown(view).encode("utf-8")))
    return html_out, md_out


def run_report(
    bundle_path: Union[str, Path], out: Optional[Union[str, Path]] = None
) -> Tuple[Path, Path]:
    """``diag report``: re-render any bundle (old, cut-short, journal) beside it or at ``out``."""
    from diag.bundle_io import load_bundle

    bundle = load_bundle(bundle_path)
    return write_reports(bundle, bundle_path, Redactor(), html_path=out)


def summary_text(bundle_path: Union[str, Path]) -> str:
    """``diag summary``: the verdict and the per-rank table, for a terminal."""
    from diag.bundle_io import load_bundle
    from diag.render.terminal import render_summary

    return Redactor().scrub(render_summary(view_of(load_bundle(bundle_path))))
