"""The verdict's wait-for graph (``Verdict.graph``) → a laid-out drawing and its chain lines.

Layers run left to right: who waits, then what it waits on (longest path over the graph with
its cycles' back edges set aside), doors to the outside last. A box whose chain ends there has
a red border when the end is a stopped or dead process, a cycle or a lock nobody releases,
grey when it waits on the outside. Over ``MAX_BOXES`` nodes only the suspects' chains are
drawn - the chain ends and who waits on them - and the note says so. Reads the bundle's
records only (never ``diag.verdict``).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Set, Tuple

from diag.model import Verdict, WaitEdge, WaitGraph, WaitNode
from diag.render import fmt
from diag.render.index import BundleIndex, Proc
from diag.render.view_graph import GraphArrow, GraphBox, GraphView
from diag.text.roles import framework_role, named

MAX_BOXES = 40
BOX_W, BOX_H = 180, 42
GAP_X, GAP_Y, PAD = 96, 18, 24
_FIRST_CODE = re.compile(r"`([^`]+)`")
_BAD_STATES = ("stopped", "zombie", "exited")


def _is_outside(key: str) -> bool:
    return key.startswith("outside:")


def _end_css(
    n: WaitNode, graph: WaitGraph, out: Dict[str, List[WaitEdge]], suspects: Set[str]
) -> str:
    """How a chain end is marked: bad (stopped, dead, cycle, lock, unanswered, or a suspect
    of the verdict), outside (it waits on a door), work (it computes or serves)."""
    if n.state in _BAD_STATES or n.key in suspects:
        return "end-bad"
    if any(e.dst == n.key and e.kind == "request" for e in graph.edges):
        return "end-bad"
    own = out.get(n.key, [])
    if any(_is_outside(e.dst) for e in own) and not any(e.dst == n.key for e in own):
        return "end-outside"
    if n.state in ("computing", "working", "spinning", "serving"):
        return "end-work"
    return "end-bad"


def _layers(keys: Sequence[str], out: Dict[str, List[WaitEdge]]) -> Dict[str, int]:
    """Longest-path layers after setting aside back edges (found by DFS); outside nodes last."""
    inner = [k for k in keys if not _is_outside(k)]
    allowed = set(inner)
    succ = {k: [e.dst for e in out.get(k, []) if e.dst in allowed and e.dst != k] for k in inner}
    color: Dict[str, int] = {}
    order: List[str] = []  # post-order
    back: Set[Tuple[str, str]] = set()
    for root in inner:
        if root in color:
            continue
        color[root] = 1
        stack: List[Tuple[str, int]] = [(root, 0)]
        while stack:
            v, i = stack.pop()
            if i < len(succ[v]):
                stack.append((v, i + 1))
                w = succ[v][i]
                if color.get(w) == 1:
                    back.add((v, w))
                elif w not in color:
                    color[w] = 1
                    stack.append((w, 0))
                continue
            color[v] = 2
            order.append(v)
    layer = {k: 0 for k in inner}
    for v in reversed(order):  # topological order of the DAG without back edges
        for w in succ[v]:
            if (v, w) not in back and layer[w] < layer[v] + 1:
                layer[w] = layer[v] + 1
    last = max(layer.values(), default=-1) + 1
    for k in keys:
        if _is_outside(k):
            layer[k] = last
    return layer


def _sub(n: WaitNode) -> str:
    if _is_outside(n.key):
        return "outside the job"
    m = _FIRST_CODE.search(n.detail)
    frame = m.group(1).rsplit(".", 1)[-1] if m and not _is_outside(n.key) else ""
    return fmt.clip(f"{n.state} · {frame}" if frame else n.state, 28)


def _pick(graph: WaitGraph, index: BundleIndex, verdict: Verdict) -> Tuple[List[WaitNode], str]:
    """The nodes to draw: all, or over MAX_BOXES the suspects' chains only."""
    nodes = list(graph.nodes)
    if len(nodes) <= MAX_BOXES:
        return nodes, ""
    by_key = {n.key: n for n in nodes}
    want: List[str] = []

    def add(key: str) -> None:
        if key in by_key and key not in want and len(want) < MAX_BOXES:
            want.append(key)

    for s in verdict.suspects:
        add(f"{s.host}/{s.pid}")
    for key in graph.ends:
        add(key)
    focus = set(want)
    for e in graph.edges:  # who waits on them, and the doors they wait on
        if e.dst in focus:
            add(e.src)
        if e.src in focus and _is_outside(e.dst):
            add(e.dst)
    total = len([n for n in nodes if not _is_outside(n.key)])
    drawn = [by_key[k] for k in want]
    shown = len([n for n in drawn if not _is_outside(n.key)])
    note = (
        f"{total} processes: only the suspects' chains are drawn - the chain ends and who "
        f"waits on them ({shown} of {total}); every chain is listed above"
    )
    return drawn, note


BOX_CHARS = 26  # a box's label line


def _box_label(n: WaitNode, proc: Optional[Proc]) -> str:
    """The node as the verdict's sentences and the tables name it ("scheduler TP0",
    "detokenizer (pid 2206)", "main (pid 2190)" where the full name does not fit a box)."""
    role = framework_role(proc.info.cmdline, proc.info.name) if proc is not None else None
    if role is None:
        return n.label
    short = role.name.split(" (")[0]
    for text in (named(role, n.rank, n.pid), f"{short} (pid {n.pid})"):
        if len(text) <= BOX_CHARS:
            return text
    return f"{short} {n.pid}"


def build_graph(index: BundleIndex, verdict: Optional[Verdict]) -> Optional[GraphView]:
    graph = verdict.graph if verdict is not None else None
    if graph is None or verdict is None:
        return None
    nodes, note = _pick(graph, index, verdict)
    keys = [n.key for n in nodes]
    drawn = set(keys)
    out: Dict[str, List[WaitEdge]] = {}
    for e in graph.edges:
        out.setdefault(e.src, []).append(e)
    layer = _layers(keys, {k: [e for e in v if e.dst in drawn] for k, v in out.items()})
    columns: Dict[int, List[WaitNode]] = {}
    for n in nodes:
        columns.setdefault(layer[n.key], []).append(n)
    ends = set(graph.ends)
    suspects = {f"{s.host}/{s.pid}" for s in verdict.suspects}
    boxes: Dict[str, GraphBox] = {}
    for col, members in sorted(columns.items()):
        members.sort(key=lambda n: (n.rank if n.rank is not None else 1 << 30, n.host, n.pid))
        for row, n in enumerate(members):
            css = f"gnode st-{n.state}"
            if _is_outside(n.key):
                css = "gnode outside"
            elif n.key in ends:
                css += " " + _end_css(n, graph, out, suspects)
            proc = index.proc_for_pid(n.pid, n.host) if not _is_outside(n.key) else None
            boxes[n.key] = GraphBox(
                key=n.key,
                label=fmt.clip(_box_label(n, proc), BOX_CHARS),
                sub=_sub(n),
                title=n.detail,
                x=PAD + col * (BOX_W + GAP_X),
                y=PAD + row * (BOX_H + GAP_Y),
                w=BOX_W,
                h=BOX_H,
                css=css,
                anchor=proc.anchor if proc is not None else "",
            )
    arrows = [_arrow(e, boxes, layer) for e in graph.edges if e.src in drawn and e.dst in drawn]
    width = PAD * 2 + max((b.x + b.w for b in boxes.values()), default=0) + 40
    height = PAD + max((b.y + b.h for b in boxes.values()), default=0) + 30
    return GraphView(
        chains=graph.chains,
        width=width,
        height=height,
        boxes=tuple(boxes.values()),
        arrows=tuple(arrows),
        note=note,
    )


def _arrow(e: WaitEdge, boxes: Dict[str, GraphBox], layer: Dict[str, int]) -> GraphArrow:
    a, b = boxes[e.src], boxes[e.dst]
    css = f"garrow k-{e.kind}"
    if e.src == e.dst:  # a loop over the box's top right corner
        x0, y0 = a.x + a.w - 40, a.y
        path = f"M{x0},{y0} C{x0},{y0 - 26} {x0 + 40},{y0 - 26} {x0 + 34},{y0 - 2}"
        return GraphArrow(path=path, label=e.kind, lx=x0 + 8, ly=y0 - 22, css=css, title=e.evidence)
    if layer[e.dst] > layer[e.src] + 1:  # over the columns between: top to top, bowing above
        x1, y1 = a.x + a.w - 30, a.y
        x2, y2 = b.x + 30, b.y
        top = min(y1, y2) - 20
        path = f"M{x1},{y1} C{x1},{top} {x2},{top} {x2},{y2 - 2}"
        return GraphArrow(
            path=path, label=e.kind, lx=(x1 + x2) // 2 - 14, ly=top + 4, css=css, title=e.evidence
        )
    if layer[e.dst] > layer[e.src]:  # forward: right side to left side
        x1, y1 = a.x + a.w, a.y + a.h // 2
        x2, y2 = b.x, b.y + b.h // 2
        mx = (x1 + x2) // 2
        path = f"M{x1},{y1} C{mx},{y1} {mx},{y2} {x2 - 2},{y2}"
        return GraphArrow(
            path=path, label=e.kind, lx=mx - 14, ly=(y1 + y2) // 2 - 4, css=css, title=e.evidence
        )
    if layer[e.dst] < layer[e.src]:  # back (a cycle): bottom to bottom, bowing below
        x1, y1 = a.x + a.w // 2 + 10, a.y + a.h
        x2, y2 = b.x + b.w // 2 - 10, b.y + b.h
        low = max(y1, y2) + GAP_Y - 4
        path = f"M{x1},{y1} C{x1},{low} {x2},{low} {x2},{y2 + 2}"
        return GraphArrow(
            path=path,
            label=e.kind,
            lx=(x1 + x2) // 2 - 14,
            ly=low - 6,
            css=css + " back",
            title=e.evidence,
        )
    # within a column: a bow out to the right, into the gap before the next column
    x1, y1 = a.x + a.w, a.y + a.h // 2 + 6
    x2, y2 = b.x + b.w, b.y + b.h // 2 - 6
    bow = x1 + min(GAP_X - 16, 30 + abs(y2 - y1) // 10)
    path = f"M{x1},{y1} C{bow},{y1} {bow},{y2} {x2 + 2},{y2}"
    return GraphArrow(
        path=path, label=e.kind, lx=bow - 18, ly=(y1 + y2) // 2, css=css + " back", title=e.evidence
    )


__all__ = ["MAX_BOXES", "build_graph"]
