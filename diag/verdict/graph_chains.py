"""Chains: the edges followed from the participants until no way forward is left (a stopped or
dead process, a cycle, the outside, work), grouped into one line per way of ending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

from diag.model import (
    WaitEdge,
    WaitNode,
)
from diag.text.units import rank_set, size
from diag.verdict.features import COMPUTE_PCT, ProcSignals
from diag.verdict.graph_nodes import (
    _DEAD_STATES,
    _WORK_STATES,
    MAX_CHAINS,
    MAX_DEPTH,
    OUTSIDE_JOB,
    _reading,
    is_outside,
)
from diag.verdict.wording import where


@dataclass
class Chain:
    """One start followed to its end: ``steps`` are (edge kind, node key) after the start."""

    start: str
    steps: List[Tuple[str, str]]
    end: str
    reason: str  # stopped | dead | computing | disk | outside | lock | self | cycle | stuck
    cycle: Tuple[str, ...] = ()


def _sccs(keys: Sequence[str], succ: Dict[str, List[str]]) -> Dict[str, int]:
    """Strongly connected components (iterative Tarjan): node -> component id."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    comp: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    counter = 0
    for root in keys:
        if root in index:
            continue
        work: List[Tuple[str, int]] = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on.add(v)
            nxt = succ.get(v, [])
            if i < len(nxt):
                work.append((v, i + 1))
                w = nxt[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp[w] = index[v]
                    if w == v:
                        break
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return comp


def _terminal(node: WaitNode) -> Optional[str]:
    if node.state == "stopped":
        return "stopped"
    if node.state in ("zombie", "exited"):
        return "dead"
    if node.state in ("computing", "working", "disk"):
        return node.state
    return None


def follow(
    start: str,
    nodes: Dict[str, WaitNode],
    out: Dict[str, List[WaitEdge]],
    comp: Dict[str, int],
    members: Dict[int, List[str]],
) -> Chain:
    """Follow the likeliest ender from ``start`` until no way forward is left."""
    steps: List[Tuple[str, str]] = []
    seen = {start}
    cur = start
    for _ in range(MAX_DEPTH):
        reason = _terminal(nodes[cur]) if (steps or not is_outside(cur)) else None
        if reason:
            return Chain(start, steps, cur, reason)
        edges = out.get(cur, [])
        if steps and not edges and nodes[cur].label.endswith(OUTSIDE_JOB):
            return Chain(start, steps, cur, "outside")  # a holder outside the job
        inner = [e for e in edges if e.dst != cur and not is_outside(e.dst)]
        if not inner:
            selfs = [e for e in edges if e.dst == cur]
            fed = any(is_outside(e.dst) for e in edges)
            if selfs and not (fed and selfs[0].kind != "lock"):
                return Chain(start, steps, cur, "lock" if selfs[0].kind == "lock" else "self")
            if any(is_outside(e.dst) for e in edges):
                return Chain(start, steps, cur, "outside")
            return Chain(start, steps, cur, "stuck")

        def score(e: WaitEdge, here: str = cur) -> int:
            t = nodes[e.dst]
            if t.state in ("zombie", "exited") and e.kind == "child":
                return 5  # an exited child ends its parent's waitpid: a live one is the wait
            if t.state in _DEAD_STATES:
                return 0
            if t.state in (*_WORK_STATES, "disk"):
                return 1
            if comp.get(e.dst) != comp.get(here):
                return 2
            return 3 if e.dst not in seen else 4

        best = min(inner, key=score)
        if best.dst in seen:
            cycle = tuple(members.get(comp.get(cur, -1), [cur]))
            return Chain(start, steps, cur, "cycle", cycle)
        steps.append((best.kind, best.dst))
        seen.add(best.dst)
        cur = best.dst
    return Chain(start, steps, cur, "stuck")


def _who(nodes: Sequence[WaitNode]) -> str:
    """Nodes as a chain names them: several ranks as a range ("ranks 0-2"), the rest (and a
    lone rank) by their labels ("scheduler TP1", "pid 12 cc1plus")."""
    ranked = [n for n in nodes if n.rank is not None]
    ranks = [n.rank for n in ranked if n.rank is not None] if len(ranked) > 1 else []
    others = [n.label for n in nodes if not (ranks and n.rank is not None)]
    parts = [rank_set(ranks)] if ranks else []
    if others:
        parts.append(", ".join(others[:4]) + (f" (+{len(others) - 4})" if len(others) > 4 else ""))
    return ", ".join(parts)


def _main_text(p: Optional[ProcSignals], node: WaitNode, short: bool = False) -> str:
    """What the end node does, in words: "sleeping in `x` ← `y`", "computing in `f`"."""
    if p is None:
        return f"{node.state}, {node.detail}" if node.detail else node.state
    if p.dead:
        code = f", exit code {p.exit_code}" if p.exit_code is not None else ""
        return f"{node.state}{code}"
    if node.state == "working":
        return f"working (its output moves) in {where(p)}"
    if node.state == "computing" and _reading(p) and p.compute_pct < COMPUTE_PCT:
        read = size(max(p.read_delta_bytes, p.file_progress_bytes))
        return f"reading in {where(p)}" + ("" if short else f" ({read} during the capture)")
    if node.state == "computing":
        hot = p.hot_label or (p.main_wait.label if p.main_wait else "?")
        pct = "" if short else f" ({p.compute_pct:.0f}% of a core)"
        return f"computing in `{hot}`{pct}"
    return f"{node.state} in {where(p)}"


def _end_text(
    chain: Chain,
    nodes: Dict[str, WaitNode],
    out: Dict[str, List[WaitEdge]],
    procs: Dict[str, ProcSignals],
    short: bool = False,
) -> str:
    n = nodes[chain.end]
    p = procs.get(chain.end)
    main = _main_text(p, n, short)
    if chain.reason == "stopped" and p is not None and p.frozen:
        text = "frozen by its cgroup (docker pause, a Slurm suspend) - thaw it, not kill -CONT"
    elif chain.reason == "stopped" and p is not None and p.traced:
        text = f"held by a tracer (state t) - let the tracer go (TracerPid in /proc/{n.pid}/status)"
    elif chain.reason == "stopped":
        text = f"stopped (SIGSTOP or a debugger) - `kill -CONT {n.pid}`"
    elif chain.reason == "dead" and chain.steps and chain.steps[-1][0] == "child":
        text = f"{main} - the parent's waitpid returns with it (it reaps the child, runs on)"
    elif chain.reason == "dead":
        text = f"{main} - it will never answer"
    elif chain.reason in ("computing", "working"):
        text = main
    elif chain.reason == "disk":
        text = f"{main} (state D: storage or NFS not answering)"
    elif chain.reason == "cycle":
        kinds = sorted(
            {e.kind for k in chain.cycle for e in out.get(k, []) if e.dst in chain.cycle}
        )
        text = f"a cycle - they wait on each other ({', '.join(kinds)}), nothing else ends it"
        if not short:  # each one's wait, in the words of its evidence
            firsts = (
                (k, next((e for e in out.get(k, []) if e.dst in chain.cycle and e.dst != k), None))
                for k in chain.cycle
            )
            hops = [f"{nodes[k].label} {e.evidence}" for k, e in firsts if e is not None]
            if hops:
                text += ": " + "; ".join(hops)[:300]
            text += " - kill it, nothing will end these waits"
    elif chain.reason == "outside" and p is None and n.label.endswith(OUTSIDE_JOB):
        text = f"{n.state}, outside the job ({n.detail}) - what it waits on is not captured"
    elif chain.reason == "outside":
        doors = sorted({nodes[e.dst].label for e in out.get(chain.end, []) if is_outside(e.dst)})
        text = f"{main} - waits on the {' / '.join(doors) or 'outside'}"
    elif chain.reason == "lock":
        locks = ""
        if p is not None and p.lock_waiters:
            addrs = len({a for _, a, _ in p.lock_waiters})
            locks = f"; {len(p.lock_waiters)} thread(s) blocked on {addrs} lock(s)"
            locks += " (a lock cycle)" if addrs >= 2 else ""
        text = f"{main}{locks} - only its own threads can release the lock"
    elif chain.reason == "self":
        text = f"{main} - only its own threads can answer it"
    else:
        text = f"{main} - nothing in the capture can end it"
    if p is not None and p.stale_requests:
        text += f"; {p.stale_requests} request(s) unanswered {p.stale_age_s:.0f}+ s"
    return text


def chain_lines(
    chains: Sequence[Chain],
    nodes: Dict[str, WaitNode],
    out: Dict[str, List[WaitEdge]],
    procs: Dict[str, ProcSignals],
) -> Tuple[List[str], List[str], List[Tuple[str, ...]], List[str]]:
    """One line per way of ending (starts that end the same way are merged), how each line
    ends (``model.ChainEnd``), the node keys each line ends at, and all the ends."""
    groups: Dict[Tuple[object, ...], List[Chain]] = {}
    end_keys = {c.end for c in chains if c.steps}
    for c in chains:
        if not c.steps and c.start in end_keys:
            continue  # already the end of someone else's chain
        if c.reason == "cycle":
            cyc = set(c.cycle)
            lead = tuple(s for s in c.steps if s[1] not in cyc)
            key: Tuple[object, ...] = ("cycle", tuple(sorted(cyc)), lead, c.start in cyc)
        elif c.steps:
            key = (c.reason, c.end, tuple(c.steps))
        else:
            key = (c.reason, _end_text(c, nodes, out, procs, short=True))
        groups.setdefault(key, []).append(c)
    lines: List[str] = []
    reasons: List[str] = []
    line_ends: List[Tuple[str, ...]] = []
    ends: List[str] = []
    ended: Set[str] = set()  # ends' members: a look-up in the list was chains x ends
    for members in groups.values():
        first = members[0]
        starts = _who([nodes[c.start] for c in members])
        if first.reason == "cycle":
            cyc = set(first.cycle)
            who = _who([nodes[k] for k in first.cycle])
            path = "".join(
                f" → ({kind}) → {nodes[k].label}" for kind, k in first.steps if k not in cyc
            )
            text = _end_text(first, nodes, out, procs)
            head = who if first.start in cyc and not path else f"{starts}{path} → {who}"
            lines.append(f"{head}: {text}")
            reasons.append(first.reason)
            line_ends.append(tuple(first.cycle))
            ends.extend(k for k in dict.fromkeys(first.cycle) if k not in ended)
            ended.update(first.cycle)
            continue
        path = "".join(f" → ({kind}) → {nodes[k].label}" for kind, k in first.steps)
        short = len(members) > 1 and not first.steps
        lines.append(f"{starts}{path}: {_end_text(first, nodes, out, procs, short)}")
        reasons.append(first.reason)
        line_ends.append(tuple(dict.fromkeys(c.end for c in members)))
        ends.extend(k for k in dict.fromkeys(c.end for c in members) if k not in ended)
        ended.update(c.end for c in members)
    return lines[:MAX_CHAINS], reasons[:MAX_CHAINS], line_ends[:MAX_CHAINS], ends
