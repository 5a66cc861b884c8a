"""``diag merge``: from per-host bundles to the written report (also the end of ``--slurm-job``).

It ends the same way as a single-host capture - ``capture.judged``, then the JSON bundle and
the HTML/Markdown reports - so a merged bundle is classified and rendered by the very same
code, only with ranks from several hosts.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence

from diag.bundle.gc_pause import collector_paused
from diag.bundle.io import check_budget, load_bundle
from diag.bundle.merge import Fold, HostPart, MissingHost
from diag.commands.capture import judged
from diag.commands.outcome import Outcome
from diag.commands.output_paths import json_output_path
from diag.errors import DiagError
from diag.model import Bundle
from diag.redaction.redact import Redactor
from diag.render.outputs import write_outputs
from diag.text.terminal import safe_line

# A host whose first sample is further than this from the reference host's is called out.
_STAGGER_NOTE_S = 1.0


def describe_hosts(bundle: Bundle) -> List[str]:
    """One line per host for people: captured or why not, and how its clock compares. Host
    names and reasons come from bundle files and remote nodes: shown terminal-safe."""
    lines: List[str] = []
    for e in bundle.hosts:
        name = safe_line(e.name)
        if e.status != "ok":
            lines.append(f"{name}: not captured - {safe_line(e.reason)}")
            continue
        parts = [f"{name}: {e.samples} sample(s)"]
        if e.samples_dropped:
            parts.append(f"{e.samples_dropped} past the shortest host left out")
        start = e.start_offset_s
        if e.clock_offset_s is not None:
            err = f" ±{e.clock_offset_error_s:.3f}" if e.clock_offset_error_s is not None else ""
            parts.append(f"clock {e.clock_offset_s:+.3f}s{err} vs reference ({e.clock_source})")
            if start is not None and abs(start) >= _STAGGER_NOTE_S:
                parts.append(f"first sample {start:+.1f}s from the reference host's")
        elif start is not None:
            parts.append(
                f"clock offset not measured: first sample {start:+.3f}s from the reference "
                "host's (clock skew and start difference together)"
            )
        else:
            parts.append("clock offset not measured")
        lines.append(", ".join(parts))
    return lines


def finish(bundle: Bundle, out: Optional[str], stem: str, notes: Sequence[str]) -> Outcome:
    """The verdict across every rank of every host (the same classifier as one host's), then
    the outputs. Per-host bundles were scrubbed where they were taken; this pass applies the
    generic patterns (tokens in argv, user:pass@ URLs) once more over the merged whole."""
    path = json_output_path(out, stem)
    bundle = judged(bundle)
    written = write_outputs(bundle, path, Redactor())
    return Outcome(bundle, written, (*notes, *describe_hosts(bundle)))


def run_merge(paths: Sequence[str], out: Optional[str] = None) -> Outcome:
    """Merge bundle files; an unreadable one is recorded as a failed host, not fatal."""
    with collector_paused():  # each bundle read would have the collector walk those before
        return _run_merge(paths, out)


def _run_merge(paths: Sequence[str], out: Optional[str]) -> Outcome:
    """One file read, decoded and folded at a time (issue 35): its threads shared with the
    hosts before it, the file's own copy dropped before the next is read. So the decode
    budget (``MAX_DECODE_BYTES``) is each file's own - only one is decoded at once - and the
    caps on processes and thread records are the merge's, counted as it grows (distinct
    thread records: equal ones are held once)."""
    fold = Fold()
    missing: List[MissingHost] = []
    first_error: Optional[DiagError] = None
    folded = processes = 0
    for path in paths:
        try:
            bundle = load_bundle(path)
        except DiagError as exc:
            first_error = first_error or exc
            missing.append(MissingHost(name=Path(path).name, reason=exc.one_line()))
            continue
        fold.add(HostPart(bundle=bundle))
        folded, processes = folded + 1, processes + len(bundle.processes)
        del bundle
        check_budget(f"the {folded} bundles together", processes, fold.thread_records)
    if not folded and first_error is not None:
        raise first_error
    out_path = json_output_path(out, "merged")  # checked before the work, like capture
    return finish(fold.merged(missing), str(out_path), "merged", ())
