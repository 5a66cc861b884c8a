"""``--json``: one versioned JSON document per command, for scripts and coding agents.

Why a document of its own and not the bundle: the bundle is the evidence (megabytes of
samples); a caller deciding what to do next needs the judgement - state, confidence, who is
suspected and why, how long until a load ends, where the reports are - in a shape that does not
move when the bundle grows a field. ``JSON_SCHEMA_VERSION`` changes when a field changes
meaning or goes away; added fields do not change it. The schema itself is
``json_schema()`` (msgspec's JSON Schema of these records), checked in as
``docs/json-schema.json``.

Every document is scrubbed as the reports are (the capture's redactor, or one taught the
bundle's environments) and printed as ASCII JSON, so no byte on stdout is a terminal escape.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    FrozenSet,
    List,
    Literal,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import msgspec

from diag.bundle.files import open_regular
from diag.model import Bundle, Verdict, history_spans
from diag.redaction.redact import Redactor, process_redactor

if TYPE_CHECKING:  # the records stay light to import: `diag ps` loads no renderer
    from diag.commands.outcome import Outcome

JSON_SCHEMA_VERSION = 1

DocKind = Literal["capture", "summary", "ps", "watch_status"]
VerdictSource = Literal["bundle", "computed", "none"]


_SOURCES: Dict[str, VerdictSource] = {"bundle": "bundle", "computed": "computed", "none": "none"}


class JsonSuspect(msgspec.Struct, frozen=True, kw_only=True):
    """A process the verdict blames (pid 0: gone before diag looked)."""

    pid: int
    rank: Optional[int] = None
    host: str = ""
    reason: str = ""
    chain: str = ""


class JsonRuleMatch(msgspec.Struct, frozen=True, kw_only=True):
    """A later rule that matched too, what it would have said, and why it was overruled."""

    rule: str
    state: str
    overruled: str = ""


class JsonPhase(msgspec.Struct, frozen=True, kw_only=True):
    """A start-up phase of one rank and when it should end (``eta_s`` from now)."""

    pid: int
    rank: Optional[int] = None
    phase: str = ""
    progress_pct: Optional[float] = None
    eta_s: Optional[float] = None
    basis: str = ""


class JsonVerdictChange(msgspec.Struct, frozen=True, kw_only=True):
    """A watch's verdict from ``since_s`` (epoch seconds) on, held ``held_s`` seconds (to the
    next change, or to the last sample)."""

    state: str
    since_s: float
    held_s: float
    sample: int
    rule: str = ""


class ResultDoc(msgspec.Struct, frozen=True, kw_only=True):
    """What ``capture --json``, ``summary --json`` and the MCP tools answer."""

    schema_version: int = JSON_SCHEMA_VERSION
    kind: DocKind
    state: str  # progressing | slow | idle | deadlocked | exited | unknown ...
    confidence: float
    verdict: str  # the one-sentence verdict, as the terminal prints it
    rule: Optional[str] = None  # the rule that decided (null in bundles older than rule ids)
    also_matched: Tuple[JsonRuleMatch, ...] = ()
    verdict_source: VerdictSource = "bundle"  # "computed": judged now, the bundle had none
    suspects: Tuple[JsonSuspect, ...] = ()
    eta_s: Optional[float] = None  # the longest start-up ETA of any rank, if one is known
    phases: Tuple[JsonPhase, ...] = ()
    warnings: Tuple[str, ...] = ()
    # Since when the waiting ranks have not run (epoch s) and for how long, from the kernel.
    quiet_since_s: Optional[float] = None
    quiet_for_s: Optional[float] = None
    # Since when nothing in the job did useful work (epoch s): ranks, logs, its own connections.
    job_quiet_since_s: Optional[float] = None
    # Since when a stopped process of the job has been stopped, at least (epoch s).
    stopped_since_s: Optional[float] = None
    history: Tuple[JsonVerdictChange, ...] = ()  # a watch's verdict changes, oldest first
    exit_code: Optional[int] = None  # a launched command's exit code
    target_pid: Optional[int] = None
    ranks: Tuple[int, ...] = ()
    processes: int = 0
    samples: int = 0
    complete: bool = True  # False: a journal cut short (a watch still running, or killed)
    reports: Dict[str, str] = {}  # "json" | "html" | "md" | "jsonl" | "log" -> path
    notes: Tuple[str, ...] = ()


class JsonJob(msgspec.Struct, frozen=True, kw_only=True):
    """One job found by ``diag ps``."""

    root_pid: int
    kind: str  # torchrun | mpi | sglang | vllm | ray | server | ranks | gpu
    launcher: str
    command: str  # scrubbed and shortened
    ranks: Tuple[int, ...] = ()
    world_size: Optional[int] = None
    processes: int = 0
    pids: Tuple[int, ...] = ()
    age_s: Optional[float] = None
    ports: Tuple[int, ...] = ()
    gpus: Tuple[int, ...] = ()
    states: Dict[str, int] = {}  # R S D T Z -> processes
    cpu_pct: Optional[float] = None  # % of one core, all its processes, now
    signals: Tuple[str, ...] = ()  # why it counts as a job: env title launcher server gpu
    capture: str = ""  # the command that diagnoses it


class PsDoc(msgspec.Struct, frozen=True, kw_only=True):
    """``diag ps --json`` and the MCP tool ``list_jobs``."""

    schema_version: int = JSON_SCHEMA_VERSION
    kind: Literal["ps"] = "ps"
    jobs: Tuple[JsonJob, ...] = ()
    gpu: str = ""  # how GPUs were read: "nvml", or why not
    scan_ms: float = 0.0
    problems: Tuple[str, ...] = ()  # what could not be read (a /proc read that hung)


def json_schema() -> Dict[str, Any]:
    """The JSON Schema of every document ``--json`` prints (docs/json-schema.json)."""
    _, components = msgspec.json.schema_components((ResultDoc, PsDoc))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"diag --json documents, schema_version {JSON_SCHEMA_VERSION}",
        "anyOf": [{"$ref": "#/$defs/ResultDoc"}, {"$ref": "#/$defs/PsDoc"}],
        "$defs": components,
    }


def _phases(verdict: Verdict) -> Tuple[JsonPhase, ...]:
    return tuple(
        JsonPhase(
            pid=p.pid,
            rank=p.rank,
            phase=p.phase,
            progress_pct=p.progress_pct,
            eta_s=p.eta_s,
            basis=p.basis,
        )
        for p in verdict.phases
    )


def _report_map(paths: Sequence[Path]) -> Dict[str, str]:
    return {p.suffix.lstrip(".") or "file": str(p.resolve()) for p in paths}


def result_doc(
    bundle: Bundle,
    *,
    kind: DocKind,
    reports: Sequence[Path] = (),
    notes: Sequence[str] = (),
    source: str = "bundle",
) -> ResultDoc:
    """The document of a judged bundle (its verdict may be None: state "unknown")."""
    verdict = bundle.verdict
    ranks = tuple(sorted({p.rank for p in bundle.processes if p.rank is not None}))
    common: Dict[str, Any] = {
        "kind": kind,
        "verdict_source": _SOURCES.get(source, "none") if verdict is not None else "none",
        "target_pid": bundle.target.root_pid,
        "ranks": ranks,
        "processes": len(bundle.processes),
        "samples": len(bundle.samples),
        "complete": bundle.complete,
        "reports": _report_map(reports),
        "notes": tuple(notes),
    }
    if verdict is None:
        return ResultDoc(state="unknown", confidence=0.0, verdict="no verdict", **common)
    etas = [p.eta_s for p in verdict.phases if p.eta_s is not None]
    return ResultDoc(
        state=verdict.state,
        confidence=round(verdict.confidence, 3),
        verdict=verdict.summary or verdict.state,
        rule=verdict.rule or None,
        also_matched=tuple(
            JsonRuleMatch(rule=m.rule, state=m.state, overruled=m.overruled)
            for m in verdict.also_matched
        ),
        suspects=tuple(
            JsonSuspect(pid=s.pid, rank=s.rank, host=s.host, reason=s.reason, chain=s.chain)
            for s in verdict.suspects
        ),
        eta_s=max(etas) if etas else None,
        phases=_phases(verdict),
        warnings=verdict.warnings,
        quiet_since_s=verdict.quiet_since_s,
        quiet_for_s=verdict.quiet_for_s,
        job_quiet_since_s=verdict.job_quiet_since_s,
        stopped_since_s=verdict.stopped_since_s,
        history=history_of(bundle),
        exit_code=verdict.exit_code,
        **common,
    )


def history_of(bundle: Bundle) -> Tuple[JsonVerdictChange, ...]:
    """The watch's verdict changes with how long each held (``history_spans``)."""
    return tuple(
        JsonVerdictChange(
            state=change.state,
            since_s=round(change.t_s, 3),
            held_s=round(held_s, 3),
            sample=change.sample,
            rule=change.rule,
        )
        for change, held_s in history_spans(bundle)
    )


def bundle_redactor(bundle: Bundle) -> Redactor:
    """A redactor that knows the secrets of the bundle's environments (as ``write_reports``)."""
    redactor = Redactor()
    for info in bundle.processes:
        redactor.add_environ(dict(info.env))
    return redactor


def encode(doc: msgspec.Struct, redactor: Optional[Redactor] = None) -> str:
    """The document as one line of ASCII JSON, every string scrubbed (by default with every
    value this process learned: ``ps --json``'s environments, a capture's secrets)."""
    scrubber = redactor if redactor is not None else process_redactor()
    data = scrubber.scrub_obj(msgspec.to_builtins(doc))
    return json.dumps(data, ensure_ascii=True, sort_keys=False)


def report_outcome_json(
    outcome: Outcome,
    *,
    merged: bool,
    fail_states: FrozenSet[str],
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> None:
    """``report_outcome`` for ``--json``: the notes and the human summary on ``err``, the one
    document on ``out``, then --fail-on (exit 10) as without --json."""
    from diag.commands.outcome import check_fail_on, report_outcome

    report_outcome(outcome, merged=merged, fail_states=frozenset(), out=err, err=err)
    bundle = outcome.bundle
    doc = result_doc(bundle, kind="capture", reports=outcome.written, notes=outcome.notes)
    redactor = outcome.redactor if outcome.redactor is not None else bundle_redactor(bundle)
    out(encode(doc, redactor))
    check_fail_on(outcome, fail_states)


REPORT_EXTS = (".json", ".html", ".md", ".jsonl", ".log")
JOURNAL_TAIL_BYTES = 65536


def _beside(path: Path) -> List[Path]:
    """The bundle and the outputs written beside it (same stem)."""
    stem = path.with_suffix("")
    return [stem.with_suffix(ext) for ext in REPORT_EXTS if stem.with_suffix(ext).is_file()]


def summary_json(bundle_path: Union[str, Path]) -> str:
    """``diag summary --json``: the document of a bundle or journal (judged now if it has no
    verdict: ``verdict_source`` "computed")."""
    from diag.bundle.io import load_bundle
    from diag.commands.report import resolve_verdict

    path = Path(bundle_path)
    bundle, source = resolve_verdict(load_bundle(path))
    doc = result_doc(bundle, kind="summary", reports=_beside(path) or [path], source=source)
    return encode(doc, bundle_redactor(bundle))


def _journal_state(journal: Path) -> Tuple[Optional[float], bool]:
    """(seconds since the journal was last written, whether it has its end line): a watch
    appends one line per sample and the end line when it stops."""
    try:  # regular files only, opened without blocking: a FIFO there is not waited on
        with open_regular(journal, follow=True) as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - JOURNAL_TAIL_BYTES))
            tail = fh.read(JOURNAL_TAIL_BYTES)
            age_s = time.time() - os.fstat(fh.fileno()).st_mtime
    except OSError:
        return None, False
    last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return round(max(age_s, 0.0), 1), b'"kind":"end"' in last


def watch_status_json(path: Union[str, Path]) -> str:
    """The latest verdict of a ``diag watch``: from the report bundle it rewrites (PATH.json,
    the verdict of its recent window, as its status line says) or, before the first one, from
    its journal; with how long ago the journal grew and whether the watch has ended."""
    from diag.bundle.io import load_bundle
    from diag.commands.report import resolve_verdict

    stem = Path(path).with_suffix("")
    journal = stem.with_suffix(".jsonl")
    live = stem.with_suffix(".json")
    source_path = live if live.is_file() else journal
    bundle, source = resolve_verdict(load_bundle(source_path))
    age_s, ended = _journal_state(journal)
    notes: List[str] = []
    if age_s is not None:
        notes.append(
            f"journal {journal} last written {age_s:.0f} s ago; watch "
            + ("ended" if ended else "still running (no end line yet)")
        )
    doc = result_doc(
        bundle,
        kind="watch_status",
        reports=_beside(stem.with_suffix(".json")),
        source=source,
        notes=notes,
    )
    doc = msgspec.structs.replace(doc, complete=ended)
    return encode(doc, bundle_redactor(bundle))
