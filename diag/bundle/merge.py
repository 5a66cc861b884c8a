"""Merge per-host bundles into one multi-node bundle: a pure function, no I/O.

Why a plain merge: multi-node jobs are captured per host (``srun`` on every node of a Slurm job,
``kubectl exec``, ``pdsh``); the verdict and the report must then see every rank at once, with
ranks labelled by host. The merged bundle is an ordinary ``Bundle`` that goes through the same
classify + render path, plus ``Bundle.hosts`` (one ``HostEntry`` per host, failed ones included).

Rules:
- Identity is ``(host, pid)``: every record that carries a ``host`` field and left it empty gets
  the host's label (a bundle that is itself a merge keeps its labels).
- Stacks are unioned: their ids are content hashes, so equal ids mean equal stacks.
- Samples are aligned by index (every collector samples on the same schedule) and cut to the
  shortest host's series: a host that stopped early must not look like ranks that exited.
  What was cut is counted per host (``samples_dropped``).
- Clocks are not trusted and not silently corrected: a measured offset (the Slurm controller
  timestamps a line each node prints) is recorded per host, and ``start_offset_s`` shows how far
  apart the hosts' first samples were in true time (raw difference when nothing was measured).
  Sample times stay on each host's own clock.
- A host that produced no bundle becomes a ``ProbeFailure`` (probe ``host``) and a failed
  ``HostEntry``; the merge is made from the rest.
- Parts are folded one at a time (``Fold``, issue 35): each host's threads become shared
  records (``diag.bundle.intern``) as it arrives, and nothing else of it is kept, so a caller
  that reads or builds one host at a time never holds every host's threads; the merge itself
  runs once all have come, on the folded parts - the same merge as on the parts themselves.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import msgspec

from diag.bundle.gc_pause import collector_paused
from diag.bundle.intern import Interner
from diag.errors import EXIT_REMOTE, DiagError
from diag.model import (
    SCHEMA_VERSION,
    Bundle,
    GpuSample,
    HostEntry,
    ProbeFailure,
    ProcessInfo,
    Sample,
    Stack,
    Target,
)


class HostPart(msgspec.Struct, frozen=True, kw_only=True):
    """One host's bundle and what the gatherer measured about its clock."""

    bundle: Bundle
    label: str = ""  # defaults to the bundle's hostname
    clock_offset_s: Optional[float] = None  # host clock minus reference clock, measured
    clock_offset_error_s: Optional[float] = None
    clock_source: str = ""


class MissingHost(msgspec.Struct, frozen=True, kw_only=True):
    """A host that was asked for but produced no bundle (unreachable, srun error, timeout)."""

    name: str
    reason: str
    duration_s: float = 0.0


def _label(obj: Any, host: str) -> Any:
    """Set ``host`` on a record that has the field and left it empty; anything else as is."""
    if (
        isinstance(obj, msgspec.Struct)
        and "host" in obj.__struct_fields__
        and getattr(obj, "host") == ""  # noqa: B009 - the field is checked dynamically
    ):
        return msgspec.structs.replace(obj, host=host)
    return obj


def _free(base: str, taken: Set[str]) -> str:
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}#{n}"
    return name


def _rename_hosts(bundle: Bundle, mapping: Dict[str, str]) -> Bundle:
    """Every host label in ``mapping`` renamed, wherever it appears (a rare path: two merged
    bundles that both hold the same host, e.g. two captures of one job merged again)."""

    def walk(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {
                k: (mapping.get(v, v) if k == "host" and isinstance(v, str) else walk(v))
                for k, v in obj.items()
            }
        if isinstance(obj, (list, tuple)):
            return [walk(v) for v in obj]
        return obj

    raw = walk(msgspec.to_builtins(bundle))
    raw["target"]["hosts"] = [mapping.get(h, h) for h in raw["target"].get("hosts", [])]
    for entry in raw.get("hosts", []):
        entry["name"] = mapping.get(entry["name"], entry["name"])
    return msgspec.convert(raw, Bundle)


def _prepare(
    parts: Sequence[HostPart], missing: Sequence[MissingHost], interner: Interner
) -> Tuple[List[HostPart], List[str]]:
    """Each part's label for its unlabelled records, unique across the merge ("a", "a#2"), and
    hosts already labelled inside a part renamed where another part holds the same name (a
    renamed part is a fresh copy: its threads shared again)."""
    taken: Set[str] = {m.name for m in missing}
    out: List[HostPart] = []
    labels: List[str] = []
    for index, part in enumerate(parts):
        bundle = part.bundle
        own = sorted({p.host for p in bundle.processes if p.host} | {e.name for e in bundle.hosts})
        mapping: Dict[str, str] = {}
        for host in own:
            mapping[host] = _free(host, taken)
            taken.add(mapping[host])
        if any(old != new for old, new in mapping.items()):
            bundle = interner.bundle(_rename_hosts(bundle, mapping))
        base = part.label or bundle.host.hostname or f"host{index}"
        label = mapping[base] if base in mapping else _free(base, taken)
        taken.add(label)
        out.append(msgspec.structs.replace(part, bundle=bundle))
        labels.append(label)
    return out, labels


def _merge_gpu(gpus: Sequence[Tuple[str, Optional[GpuSample]]]) -> Optional[GpuSample]:
    present = [(host, g) for host, g in gpus if g is not None]
    if not present:
        return None
    devices = tuple(_label(d, host) for host, g in present for d in g.devices)
    down = [f"{host}: {g.reason}" for host, g in present if not g.available and g.reason]
    drivers = [g.driver_version for _, g in present if g.driver_version]
    return GpuSample(
        available=any(g.available for _, g in present),
        reason="; ".join(down) or None,
        driver_version=drivers[0] if drivers else None,
        devices=devices,
    )


def _combine(values: Sequence[Tuple[str, Any]], default: Any) -> Any:
    """Generic rule for fields this module does not know by name (added by later versions):
    tuples are concatenated (items labelled with their host), dicts unioned, else first set."""
    if isinstance(default, tuple):
        return tuple(_label(item, host) for host, value in values for item in value)
    if isinstance(default, dict):
        merged: Dict[Any, Any] = {}
        for _, value in values:
            for key, item in value.items():
                merged.setdefault(key, item)
        return merged
    for _, value in values:
        if value != default:
            return value
    return default


def _field_defaults(cls: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for field in msgspec.structs.fields(cls):
        if field.default is not msgspec.NODEFAULT:
            out[field.name] = field.default
        elif field.default_factory is not msgspec.NODEFAULT:
            out[field.name] = field.default_factory()
    return out


_SAMPLE_KNOWN = {"index", "t_s", "duration_s", "processes", "logs", "gpu", "failures",
                 "probe_timings_s"}  # fmt: skip


def _merge_sample(index: int, parts: Sequence[Tuple[str, Sample]]) -> Sample:
    timings: Dict[str, float] = {}
    for _, s in parts:
        for key, value in s.probe_timings_s.items():
            timings[key] = max(timings.get(key, 0.0), value)
    extra = {
        name: _combine([(h, getattr(s, name)) for h, s in parts], default)
        for name, default in _field_defaults(Sample).items()
        if name not in _SAMPLE_KNOWN
    }
    return Sample(
        index=index,
        t_s=parts[0][1].t_s,
        duration_s=max(s.duration_s for _, s in parts),
        processes=tuple(_label(p, h) for h, s in parts for p in s.processes),
        logs=tuple(_label(log, h) for h, s in parts for log in s.logs),
        gpu=_merge_gpu([(h, s.gpu) for h, s in parts]),
        failures=tuple(_label(f, h) for h, s in parts for f in s.failures),
        probe_timings_s=timings,
        **extra,
    )


def _true_time(t_s: float, part: HostPart) -> float:
    return t_s - (part.clock_offset_s or 0.0)


def _host_entries(parts: Sequence[HostPart], labels: Sequence[str], kept: int) -> List[HostEntry]:
    ref_start: Optional[float] = None
    entries: List[HostEntry] = []
    for part, label in zip(parts, labels):
        b = part.bundle
        if b.hosts:  # already a merge: keep its own per-host entries
            entries.extend(b.hosts)
            continue
        start: Optional[float] = None
        if b.samples:
            start = _true_time(b.samples[0].t_s, part)
            if ref_start is None:
                ref_start = start
        entries.append(
            HostEntry(
                name=label,
                info=b.host,
                clock_offset_s=part.clock_offset_s,
                clock_offset_error_s=part.clock_offset_error_s,
                clock_source=part.clock_source,
                start_offset_s=(
                    round(start - ref_start, 3)
                    if start is not None and ref_start is not None
                    else None
                ),
                samples=len(b.samples),
                samples_dropped=max(len(b.samples) - kept, 0) if b.samples else 0,
                complete=b.complete,
            )
        )
    return entries


_BUNDLE_KNOWN = {"schema_version", "created_s", "host", "target", "processes", "stacks",
                 "samples", "failures", "verdict", "hosts", "complete"}  # fmt: skip


def _pooled(
    parts: Sequence[HostPart], labels: Sequence[str]
) -> Tuple[Dict[Tuple[str, int], ProcessInfo], Dict[str, Stack], List[ProbeFailure]]:
    """Every host's processes (keyed by host and pid), stacks (interned by content, so one
    stack seen on many hosts is kept once) and failures, each labelled with its host."""
    processes: Dict[Tuple[str, int], ProcessInfo] = {}
    stacks: Dict[str, Stack] = {}
    failures: List[ProbeFailure] = []
    for part, label in zip(parts, labels):
        for info in part.bundle.processes:
            info = _label(info, label)
            processes.setdefault((info.host, info.pid), info)
        for stack_id, stack in part.bundle.stacks.items():
            stacks.setdefault(stack_id, stack)
        failures.extend(_label(f, label) for f in part.bundle.failures)
    return processes, stacks, failures


def _merged_target(parts: Sequence[HostPart], entries: Sequence[HostEntry]) -> Target:
    """The first host's command; a root pid only for one host (pids differ per host); every
    host's logs, each once."""
    first = parts[0].bundle
    log_paths: List[str] = []
    for part in parts:
        for path in part.bundle.target.log_paths:
            if path not in log_paths:
                log_paths.append(path)
    return Target(
        root_pid=first.target.root_pid if len(parts) == 1 else None,
        command=first.target.command,
        launched=any(p.bundle.target.launched for p in parts),
        log_paths=tuple(log_paths),
        hosts=tuple(e.name for e in entries),
    )


class Fold:
    """Per-host parts folded as they come: each one's threads shared with the parts before
    (``Interner``), the part itself dropped by the caller. ``merged`` then merges the folded
    parts - what ``merge_bundles`` of all the parts at once would give, equal field by field."""

    def __init__(self) -> None:
        self._parts: List[HostPart] = []
        self._interner = Interner()

    @property
    def thread_records(self) -> int:
        """Distinct thread records held so far (equal ones counted once)."""
        return self._interner.thread_records

    def add(self, part: HostPart) -> None:
        self._parts.append(msgspec.structs.replace(part, bundle=self._interner.bundle(part.bundle)))

    def merged(self, missing: Sequence[MissingHost] = ()) -> Bundle:
        """One bundle from the parts folded so far (``merge_bundles``'s rules)."""
        with collector_paused():  # every record is copied once: see gc_pause
            return _merged(self._parts, missing, self._interner)


def merge_bundles(parts: Iterable[HostPart], missing: Sequence[MissingHost] = ()) -> Bundle:
    """One bundle from per-host bundles; ``missing`` hosts are recorded, not fatal.

    ``parts`` may be a generator: each part is folded as it comes and not held (``Fold``);
    ``missing`` is read once ``parts`` is exhausted, so the generator may add to it.
    The first part is the reference host (its ``HostInfo`` becomes ``Bundle.host``). The
    verdict is left empty: the caller classifies the merged bundle across all ranks.
    """
    fold = Fold()
    with collector_paused():  # the parts' records are copied as they come: see gc_pause
        for part in parts:
            fold.add(part)
    return fold.merged(missing)


def _merged(
    parts: Sequence[HostPart], missing: Sequence[MissingHost], interner: Interner
) -> Bundle:
    if not parts:
        names = ", ".join(m.name for m in missing) or "none given"
        reasons = "; ".join(f"{m.name}: {m.reason}" for m in missing)
        raise DiagError(
            f"no host could be captured ({names}){': ' + reasons if reasons else ''}",
            "check that the nodes are reachable and diag is installed on them",
            EXIT_REMOTE,
        )
    parts, labels = _prepare(parts, missing, interner)
    with_samples = [len(p.bundle.samples) for p in parts if p.bundle.samples]
    kept = min(with_samples) if with_samples else 0

    processes, stacks, failures = _pooled(parts, labels)
    failures.extend(
        ProbeFailure(probe="host", reason=m.reason, duration_s=m.duration_s, host=m.name)
        for m in missing
    )

    samples = tuple(
        _merge_sample(i, [(lb, p.bundle.samples[i]) for p, lb in zip(parts, labels)
                          if p.bundle.samples])
        for i in range(kept)
    )  # fmt: skip
    entries = _host_entries(parts, labels, kept)
    entries.extend(HostEntry(name=m.name, status="failed", reason=m.reason) for m in missing)

    first = parts[0].bundle
    target = _merged_target(parts, entries)
    extra = {
        name: _combine([(lb, getattr(p.bundle, name)) for p, lb in zip(parts, labels)], default)
        for name, default in _field_defaults(Bundle).items()
        if name not in _BUNDLE_KNOWN
    }
    return Bundle(
        schema_version=SCHEMA_VERSION,
        created_s=min(p.bundle.created_s for p in parts),
        host=first.host,
        target=target,
        processes=tuple(processes.values()),
        stacks=stacks,
        samples=samples,
        failures=tuple(failures),
        verdict=None,
        hosts=tuple(entries),
        complete=all(p.bundle.complete for p in parts),
        **extra,
    )
