"""Write the HTML report and the Markdown summary of a bundle, scrubbed, atomically.

The one path every report file takes (``diag capture``, ``diag watch``, ``diag merge`` through
``write_outputs``, and ``diag report``): render, pass the bytes through the capture's
``Redactor.scrub_bytes`` as a last line of defence (a secret that slipped into a thread name
or a log line the probes missed), then ``atomic_write_bytes`` so a reader or a crash never
sees half a report. The JSON and the HTML are each kept under a size cap
(``output_caps``): one over it is made again with the stacks cut, and the cut recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple, Union

from diag.bundle.gc_pause import collector_paused
from diag.bundle.io import atomic_write_bytes, encode_bundle
from diag.bundle.outdir import OutputDir
from diag.errors import DiagError
from diag.model import Bundle
from diag.redaction.redact import Redactor
from diag.render.build import build_view
from diag.render.html import environment, render_html
from diag.render.markdown import render_markdown
from diag.render.output_caps import cut_text, fit, html_cap_bytes, json_cap_bytes, md_cap_bytes
from diag.render.view import ReportView


def view_of(bundle: Bundle, verdict_source: str = "bundle") -> ReportView:
    """The report of a bundle and the verdict it carries (``verdict_source`` says whether it was
    taken with the bundle, "bundle", or judged afterwards by ``diag report``, "computed")."""
    return build_view(bundle, bundle.verdict, verdict_source)


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
    verdict_source: str = "bundle",
    directory: Optional[OutputDir] = None,
) -> Tuple[Path, Path]:
    """Write PATH.html and PATH.md beside ``base`` (or the HTML at ``html_path``), relative to
    ``directory`` when given (the watch's checked handle; then the HTML goes beside ``base``)."""
    scrub = redactor if redactor is not None else Redactor()
    for info in bundle.processes:
        scrub.add_environ(dict(info.env))
    html_out, md_out = report_paths(html_path if html_path is not None else base)

    made: List[Tuple[Bundle, ReportView]] = []

    def view(b: Bundle) -> ReportView:
        """The view of ``b``, built once: the Markdown reads the HTML's own when no cut was
        needed (at 16,384 ranks a view is seconds)."""
        if not made or made[0][0] is not b:
            made[:] = [(b, view_of(b, verdict_source))]
        return made[0][1]

    def html_of(b: Bundle) -> bytes:
        return scrub.scrub_bytes(render_html(view(b)).encode("utf-8", "replace"))

    with collector_paused():  # a merged bundle's records: see diag.bundle.gc_pause
        # Under its cap (output_caps): the Markdown is made from the same, maybe cut, bundle.
        bundle, html_data = fit(bundle, html_of, html_cap_bytes(), "the HTML report")
        # Each value scrubbed before Markdown escapes it (a backslash inside a secret is a
        # spelling no pass over the file knows), and the file scrubbed again as every output is.
        md_text = render_markdown(view(bundle), scrub.scrub)
    md_data = scrub.scrub_bytes(md_text.encode("utf-8", "replace"))
    md_data = cut_text(md_data, md_cap_bytes(), html_out.name)
    # ``diag report`` writes beside a bundle someone handed over: the directory is walked and
    # checked as ``-o`` is (``OutputDir.open``), never written into on trust.
    handle = directory if directory is not None else OutputDir.open(html_out.parent)
    failure: Optional[DiagError] = None
    try:
        for path, data in ((html_out, html_data), (md_out, md_data)):
            try:  # a full disk that refuses the HTML may still take the (smaller) Markdown
                atomic_write_bytes(path, data, handle)
            except DiagError as exc:
                failure = failure or exc
    finally:
        if directory is None:
            handle.close()
    if failure is not None:
        raise failure
    return html_out, md_out


def write_outputs(
    bundle: Bundle, json_path: Path, redactor: Redactor, directory: Optional[OutputDir] = None
) -> Tuple[Path, ...]:
    """Write every output file: PATH.json, then PATH.html and PATH.md (all scrubbed).

    ``directory`` is the checked handle of their directory (a watch opens it once); without
    it the directory is walked and checked again here (``OutputDir.open``), and written by
    that handle. A JSON that does not fit (a full disk) does not stop the reports, which are
    smaller: each is still attempted, and the first failure is raised once all were tried."""
    handle = directory if directory is not None else OutputDir.open(json_path.parent)
    try:
        failure: Optional[DiagError] = None
        bundle, data = fit(
            bundle,
            lambda b: redactor.scrub_bytes(encode_bundle(b)),
            json_cap_bytes(),
            "the JSON bundle",
        )
        try:
            atomic_write_bytes(json_path, data, handle)
        except DiagError as exc:
            failure = exc
        try:
            reports = write_reports(bundle, json_path, redactor, directory=handle)
        except DiagError as exc:
            failure = failure or exc
    finally:
        if directory is None:
            handle.close()
    if failure is not None:
        raise failure
    return (json_path, *reports)


def warm_templates() -> None:
    """Compile the report template (in memory: there is no cache on disk to load it from)
    ahead of the first report: a capture does it while it waits between samples
    (``commands.capture.warm_up``)."""
    environment().get_template("report.html.j2")
