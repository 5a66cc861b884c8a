"""The report of a big job (more than ``SCALE_RANKS`` ranks): one page a person can read.

A 4,096-rank job has 4,096 timelines, matrix rows and rank details, most of them alike; a
report that drew them all would be hundreds of MB. At scale:

- the ranks are grouped as a call-path prefix tree (LLNL STAT's view): each edge is a chain of
  frames, outermost first, with the set of ranks that went down it; the branch with the fewest
  ranks (the odd one) comes first;
- timelines, the stack matrix, the rank details and tables show the suspects and the first
  ``PER_CLASS`` ranks of each equivalence class (and the non-rank processes of their nodes),
  with a note saying so;
- a per-host summary (node, ranks, classes, clock offset, failures), odd nodes first;
- evidence items that repeat one signal for many ranks are folded into one line each.

``restrict`` narrows the shared ``BundleIndex``; ``finish`` adds the rest to a built view.
"""

from __future__ import annotations

import copy
import os
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

import msgspec

from diag.model import Evidence, Frame, HostEntry, RankClass, Verdict, main_thread
from diag.render import fmt
from diag.render.index import BundleIndex, Key, Proc
from diag.render.stacks import StackRegistry
from diag.render.view import EvidenceView, ReportView
from diag.render.view_scale import HostSummary, ScaledReportView, ScaleView, TreeNode
from diag.text.units import rank_set

SCALE_RANKS = 64
PER_CLASS = 3
MAX_EVIDENCE_PER_SIGNAL = 3
MAX_TREE_DEPTH = 40
_CLOCK_ODD_S = 1.0


def at_scale(index: BundleIndex) -> bool:
    return sum(1 for p in index.procs if p.info.rank is not None) > SCALE_RANKS


def _classes(index: BundleIndex, verdict: Optional[Verdict]) -> List[RankClass]:
    """The verdict's classes; without a verdict, ranks grouped by their last main stack."""
    if verdict is not None and verdict.classes:
        return list(verdict.classes)
    groups: Dict[Optional[str], List[Proc]] = {}
    for proc in index.procs:
        if proc.info.rank is None or proc.last is None:
            continue
        thread = main_thread(proc.last)
        groups.setdefault(thread.stack_id if thread else None, []).append(proc)
    ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    return [
        RankClass(
            signature=sid or "<no python stack>",
            label=sid or "no Python stack",
            ranks=tuple(p.info.rank for p in procs if p.info.rank is not None),
            pids=tuple(p.key[1] for p in procs),
            hosts=tuple(p.key[0] for p in procs),
            stack_id=sid,
        )
        for sid, procs in ordered
    ]


def _members(index: BundleIndex, rc: RankClass) -> List[Proc]:
    if rc.hosts:
        return [index.by_key[k] for k in rc.members() if k in index.by_key]
    by_rank = index.by_rank
    return [by_rank[r] for r in rc.ranks if r in by_rank]


def shown(index: BundleIndex, verdict: Optional[Verdict]) -> Set[Key]:
    """The processes drawn one by one: suspects, a few of each class, their nodes' others."""
    keys: Set[Key] = {p.key for p in index.procs if p.is_suspect}
    for rc in _classes(index, verdict):
        members = sorted(_members(index, rc), key=lambda p: (p.info.rank or 0, p.key))
        keys.update(p.key for p in members[:PER_CLASS])
    hosts = {k[0] for k in keys}
    keys.update(p.key for p in index.procs if p.info.rank is None and p.key[0] in hosts)
    return keys


def restrict(index: BundleIndex, keys: Set[Key]) -> BundleIndex:
    """A shallow copy of ``index`` that holds only ``keys`` (same bundle, same verdict)."""
    out = copy.copy(index)
    out.procs = [p for p in index.procs if p.key in keys]
    out.by_key = {p.key: p for p in out.procs}
    out.by_rank = {p.info.rank: p for p in out.procs if p.info.rank is not None}
    out.hosts = sorted({p.key[0] for p in out.procs})
    return out


# -- the prefix tree ---------------------------------------------------------------------------


def _frame_label(f: Frame) -> str:
    from diag.frames import is_library

    if is_library(f):
        return f.name
    return f"{f.name} ({os.path.basename(f.filename) or '?'}:{f.line})"


class _Node:
    __slots__ = ("children", "classes", "keys", "label", "ranks", "stack_id")

    def __init__(self, label: str) -> None:
        self.label = label
        self.children: Dict[str, _Node] = {}
        self.ranks: Set[int] = set()
        self.keys: Set[Key] = set()
        self.classes: List[str] = []
        self.stack_id: Optional[str] = None


def _where(keys: Set[Key]) -> str:
    hosts = sorted({h for h, _ in keys if h})
    if not hosts:
        return ""
    return f"on {hosts[0]}" if len(hosts) == 1 else f"on {len(hosts):,} nodes"


def build_tree(
    index: BundleIndex, verdict: Optional[Verdict], reg: StackRegistry
) -> Tuple[TreeNode, ...]:
    root = _Node("")
    for rc in _classes(index, verdict):
        members = _members(index, rc)
        stack = reg.get(rc.stack_id)
        path = [_frame_label(f) for f in reversed(stack.frames)] if stack else [rc.label]
        node = root
        for label in path[:MAX_TREE_DEPTH] or ["(empty stack)"]:
            node = node.children.setdefault(label, _Node(label))
            node.ranks.update(rc.ranks)
            node.keys.update(p.key for p in members)
        node.classes.append(rc.label)
        node.stack_id = rc.stack_id
    return _views(list(root.children.values()), reg)


def _views(nodes: Sequence[_Node], reg: StackRegistry) -> Tuple[TreeNode, ...]:
    biggest = max((len(n.keys) for n in nodes), default=0)
    out = []
    for node in sorted(nodes, key=lambda n: (len(n.keys), min(n.ranks, default=0))):
        frames = [node.label]
        while len(node.children) == 1 and not node.classes:  # a chain they all share
            (child,) = node.children.values()
            if child.keys != node.keys:
                break
            frames.append(child.label)
            node = child
        anchor, _ = reg.ref(node.stack_id, "call-path tree") if node.classes else ("", "")
        out.append(
            TreeNode(
                frames=tuple(frames),
                ranks_text=rank_set(node.ranks) if node.ranks else "",
                count=len(node.keys),
                where=_where(node.keys),
                odd=len(nodes) > 1 and len(node.keys) < biggest,
                classes=tuple(node.classes),
                stack_anchor=anchor,
                children=_views(list(node.children.values()), reg),
            )
        )
    return tuple(out)


# -- per host ----------------------------------------------------------------------------------


def _letter(n: int) -> str:
    text = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        text = chr(ord("A") + r) + text
    return text


def build_hosts(index: BundleIndex, verdict: Optional[Verdict]) -> Tuple[HostSummary, ...]:
    """One row per host: its ranks by class, its suspects, its clock and its probe failures;
    failed hosts first, then those with a suspect, then the odd ones."""
    bundle = index.bundle
    classes = _classes(index, verdict)
    letter: Dict[Key, str] = {}
    for n, rc in enumerate(classes):
        for p in _members(index, rc):
            letter[p.key] = _letter(n)
    failures: Dict[str, int] = {}
    for f in (*bundle.failures, *(f for s in bundle.samples for f in s.failures)):
        failures[f.host] = failures.get(f.host, 0) + 1
    ranks: Dict[str, List[Proc]] = {}
    for p in index.procs:
        if p.info.rank is not None:
            ranks.setdefault(p.key[0], []).append(p)
    entries = {e.name: e for e in bundle.hosts}
    names = list(dict.fromkeys([*entries, *index.hosts]))
    rows = [
        _host_row(name, entries.get(name), ranks.get(name, []), letter, failures.get(name, 0))
        for name in names
    ]

    def rank_of(row: HostSummary) -> Tuple[int, str]:
        if row.status != "ok":
            return (0, row.name)
        if "suspect" in row.note:
            return (1, row.name)
        return (2 if row.odd else 3, row.name)

    return tuple(sorted(rows, key=rank_of))


def _host_row(
    name: str,
    entry: Optional[HostEntry],
    mine: List[Proc],
    letter: Dict[Key, str],
    n_fail: int,
) -> HostSummary:
    counts: Dict[str, int] = {}
    for p in mine:
        key = letter.get(p.key, "?")
        counts[key] = counts.get(key, 0) + 1
    notes = []
    status = entry.status if entry is not None else "ok"
    if status != "ok":
        notes.append(f"not captured: {entry.reason}" if entry and entry.reason else status)
    suspects = [p for p in mine if p.is_suspect]
    if suspects:
        named = [p.info.rank for p in suspects if p.info.rank is not None]
        notes.append(f"suspect {rank_set(named)}" if named else "suspect")
    odd_classes = sorted(k for k in counts if k != "A")
    if odd_classes:
        notes.append("class " + ", ".join(odd_classes))
    offset = _clock_offset(entry, notes)
    if n_fail:
        notes.append(f"{n_fail} probe failure{'s' if n_fail != 1 else ''}")
    shown_rank = next((p.anchor for p in (suspects or mine[:PER_CLASS])), "")
    return HostSummary(
        name=name or "(local)",
        status=status,
        ranks_text=rank_set(p.info.rank for p in mine if p.info.rank is not None) if mine else "–",
        ranks=len(mine),
        classes=", ".join(f"{k} ×{v}" for k, v in sorted(counts.items())) or "–",
        clock_offset=offset,
        failures=n_fail,
        odd=bool(notes),
        note="; ".join(notes),
        anchor=shown_rank,
    )


def _clock_offset(entry: Optional[HostEntry], notes: List[str]) -> str:
    """The host's clock against the reference, as measured (or its first sample's offset when
    it was not); a note when it is off by ``_CLOCK_ODD_S`` or more."""
    if entry is not None and entry.clock_offset_s is not None:
        offset = f"{entry.clock_offset_s:+.3f} s"
        if entry.clock_offset_error_s is not None:
            offset += f" ± {entry.clock_offset_error_s:.3f}"
        if abs(entry.clock_offset_s) >= _CLOCK_ODD_S:
            notes.append(f"clock {entry.clock_offset_s:+.3f} s from the reference")
        return offset
    if entry is not None and entry.start_offset_s is not None:
        if abs(entry.start_offset_s) >= _CLOCK_ODD_S:
            notes.append(f"first sample {entry.start_offset_s:+.2f} s from the reference")
        return f"not measured (first sample {entry.start_offset_s:+.2f} s)"
    return "–"


# -- evidence ----------------------------------------------------------------------------------


def fold_evidence(
    items: Sequence[Evidence], view: Callable[[Evidence], EvidenceView]
) -> Tuple[EvidenceView, ...]:
    """Each signal's first few items, then one line for the rest of it; only the items kept
    are drawn (``view``): 16,384 ranks give ~35,000 items, of which a few dozen are shown."""
    by_signal: Dict[str, List[Evidence]] = {}
    for e in items:
        by_signal.setdefault(e.signal, []).append(e)
    out: List[EvidenceView] = []
    for signal, group in by_signal.items():  # in the order each signal first appears
        out.extend(view(e) for e in group[:MAX_EVIDENCE_PER_SIGNAL])
        rest = group[MAX_EVIDENCE_PER_SIGNAL:]
        if rest:
            out.append(
                EvidenceView(
                    signal=signal,
                    detail=f"… and {len(rest):,} more like it",
                    anchor="tree",
                    section_title="Call-path tree",
                    ranks_text="",
                    samples_text="",
                )
            )
    return tuple(out)


# -- the view ----------------------------------------------------------------------------------


def _lead(index: BundleIndex, verdict: Optional[Verdict], hosts: Sequence[HostSummary]) -> str:
    if verdict is not None:
        for s in verdict.suspects:
            proc = index.proc_for_pid(s.pid, s.host)
            node = s.host or (proc.key[0] if proc else "")
            rank = s.rank if s.rank is not None else (proc.info.rank if proc else None)
            who = f"rank {rank}" if rank is not None else f"pid {s.pid}"
            return f"Suspect: {node + ', ' if node else ''}{who} (pid {s.pid})"
    odd = [h for h in hosts if h.odd]
    if odd:
        return f"Look first at {odd[0].name}: {odd[0].note}"
    return ""


def finish(
    view: ReportView,
    index: BundleIndex,
    part: BundleIndex,
    verdict: Optional[Verdict],
    reg: StackRegistry,
) -> ScaledReportView:
    """``view`` (its per-process sections built from ``part``) as the report at scale."""
    tree = build_tree(index, verdict, reg)
    anchors = {p.anchor for p in part.procs}
    hosts = tuple(  # a node links to its first rank drawn in detail, if any is
        h if h.anchor in anchors else msgspec.structs.replace(h, anchor="")
        for h in build_hosts(index, verdict)
    )
    ranks = sum(1 for p in index.procs if p.info.rank is not None)
    drawn = sum(1 for p in part.procs if p.info.rank is not None)
    note = (
        f"{ranks:,} ranks on {len([h for h in hosts if h.status == 'ok']):,} node(s): the "
        f"timelines, stack matrix and rank details show {drawn} of them (the suspects and the "
        f"first {PER_CLASS} ranks of each equivalence class) and the other processes of their "
        "nodes; the call-path tree and the host table below cover every rank."
    )
    shown_hosts = set(part.hosts)
    fields = {name: getattr(view, name) for name in view.__struct_fields__}
    # ``evidence`` is folded as it is built (``build._evidence``: ``fold_evidence``).
    fields["logs"] = tuple(
        lg for lg in view.logs if lg.path.split(":", 1)[0] in shown_hosts or ":" not in lg.path
    )
    fields["gpu"] = msgspec.structs.replace(
        view.gpu,
        rows=tuple(
            g
            for g in view.gpu.rows
            if g.name.split(": ", 1)[0] in shown_hosts or ": " not in g.name
        ),
    )
    fields["collectives"] = tuple(c for c in view.collectives if c.behind or c.anchor in anchors)[
        :200
    ]
    fields["nccl_logs"] = tuple(n for n in view.nccl_logs if n.anchor in anchors)[:200]
    fields["stacks"] = reg.views()
    odd = sum(1 for h in hosts if h.odd)
    return ScaledReportView(
        **fields,
        scale=ScaleView(
            note=note,
            tree=tree,
            hosts=hosts,
            hosts_note=f"{len(hosts):,} nodes, {odd:,} of them odd (listed first)"
            + f"; clock offsets as measured by the gatherer ({fmt.count(ranks, 'rank')})",
            lead=_lead(index, verdict, hosts),
        ),
    )
