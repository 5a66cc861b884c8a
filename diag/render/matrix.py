"""The rank × sample matrix of main-thread stack signatures: "rank 2 is the odd one" at a glance.

Each cell is a letter for the signature (A = the most common), coloured by class. Consecutive
samples in which no rank changed collapse into one column (a deadlock of 100 samples is one
wide column, not 100), and a cell is marked odd when most ranks of that column share one
signature and this one does not - the rank a maintainer should read first.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

from diag.frames import Signature
from diag.model import ProcessSample, main_thread
from diag.render.index import BundleIndex, Proc
from diag.render.stacks import StackRegistry, chain, signature, top
from diag.render.view import ClassView, LegendEntry, Matrix, MatrixCell, MatrixRow
from diag.text.units import rank_set

MAX_COLUMNS = 60
PALETTE = 8

# Cells without a Python stack: (signature key, letter, description)
_SPECIAL: Dict[str, Tuple[str, str]] = {
    "absent": ("", "not sampled"),
    "exited": ("✕", "process exited"),
    "zombie": ("z", "zombie: exited, not reaped by its parent"),
    "nostack": ("·", "no Python stack (not Python, or py-spy failed)"),
}

Key = Tuple[str, ...]  # ("sig", ...) or ("special", name)


def _cell_key(ps: Optional[ProcessSample], reg: StackRegistry) -> Tuple[Key, Optional[str]]:
    if ps is None:
        return ("special", "absent"), None
    if ps.status in ("exited", "zombie"):
        return ("special", ps.status), None
    thread = main_thread(ps)
    stack = reg.get(thread.stack_id) if thread is not None else None
    if thread is None or stack is None:
        return ("special", "nostack"), None
    assert thread.stack_id is not None
    return reg.memo(thread.stack_id, lambda: _sig_key(signature(stack))), thread.stack_id


def _sig_key(sig: Signature) -> Key:
    return ("sig", *(f"{n}\x00{f}\x00{line}" for n, f, line in sig))


def ranks_text(procs: Sequence[Proc]) -> str:
    ranks = [p.info.rank for p in procs if p.info.rank is not None]
    others = [p.label for p in procs if p.info.rank is None]
    parts = []
    if ranks:
        parts.append(rank_set(ranks))
    parts.extend(others)
    return ", ".join(parts)


def build_matrix(index: BundleIndex, reg: StackRegistry) -> Matrix:
    samples = [s.index for s in index.bundle.samples]
    procs = [p for p in index.procs if p.samples]
    grid, stack_of = _grid(procs, samples, reg)
    spans, note = _spans(grid, len(samples))
    counts: Dict[Key, int] = {}
    for row in grid:
        for key in row:
            if key[0] == "sig":
                counts[key] = counts.get(key, 0) + 1
    order = sorted(counts, key=lambda k: -counts[k])  # stable: first seen wins ties
    letters = {k: _letter(n) for n, k in enumerate(order)}
    css = {k: f"c{n % PALETTE}" for n, k in enumerate(order)}
    holders: Dict[Key, List[Proc]] = {}
    rows = []
    peers = _peers(procs)
    majority = [_majority([row[a] for p, row in zip(procs, grid) if p in peers]) for a, _ in spans]
    for proc, row in zip(procs, grid):
        cells = []
        for col, (a, b) in enumerate(spans):
            key = row[a]
            odd = proc in peers and majority[col] is not None and key != majority[col]
            odd = odd and key != ("special", "absent")
            label = _column_label(samples, a, b)
            cells.append(
                MatrixCell(
                    letter=letters.get(key, _SPECIAL.get(key[-1], ("?", ""))[0]),
                    css=css.get(key, "sp"),
                    title=f"{proc.label}, sample {label}: {_describe(key, stack_of, reg)}",
                    odd=odd,
                )
            )
            if proc not in holders.setdefault(key, []):
                holders[key].append(proc)
        rows.append(
            MatrixRow(
                label=proc.label,
                anchor=proc.anchor,
                suspect=proc.is_suspect,
                cells=tuple(cells),
                badge=proc.badge,
            )
        )
    return Matrix(
        columns=tuple(_column_label(samples, a, b) for a, b in spans),
        rows=tuple(rows),
        legend=_legend(order, (letters, css), stack_of, holders, reg),
        classes=_classes(index, reg),
        note=note,
    )


def _grid(
    procs: Sequence[Proc], samples: Sequence[int], reg: StackRegistry
) -> Tuple[List[List[Key]], Dict[Key, str]]:
    """Each process's cell key in each sample, and the stack each stack key stands for."""
    grid: List[List[Key]] = []
    stack_of: Dict[Key, str] = {}
    for proc in procs:
        by_index = dict(proc.samples)
        row = []
        for i in samples:
            key, stack_id = _cell_key(by_index.get(i), reg)
            row.append(key)
            if stack_id is not None:
                stack_of[key] = stack_id
        grid.append(row)
    return grid, stack_of


def _spans(grid: Sequence[Sequence[Key]], columns: int) -> Tuple[List[Tuple[int, int]], str]:
    """Runs of samples where no row changed, collapsed into one column each; past
    ``MAX_COLUMNS`` of them, evenly spaced ones (and a note saying so)."""
    spans: List[Tuple[int, int]] = []
    for c in range(columns):
        if spans and all(row[c] == row[spans[-1][0]] for row in grid):
            spans[-1] = (spans[-1][0], c)
        else:
            spans.append((c, c))
    note = ""
    if len(spans) > MAX_COLUMNS:
        step = len(spans) / MAX_COLUMNS
        note = f"showing {MAX_COLUMNS} of {len(spans)} distinct columns, evenly spaced"
        spans = [spans[int(k * step)] for k in range(MAX_COLUMNS)]
    return spans, note


def _legend(
    order: Sequence[Key],
    style: Tuple[Dict[Key, str], Dict[Key, str]],
    stack_of: Dict[Key, str],
    holders: Dict[Key, List[Proc]],
    reg: StackRegistry,
) -> Tuple[LegendEntry, ...]:
    """One entry per stack (its letter, colour, top frame, who was in it), then the
    special cells shown (absent, dead, ...)."""
    letters, css = style
    legend = []
    for key in order:
        stack = reg.get(stack_of.get(key))
        anchor, _ = reg.ref(stack_of.get(key))
        legend.append(
            LegendEntry(
                letter=letters[key],
                css=css[key],
                top=top(stack),
                where=chain(stack) if stack is not None else "",
                ranks_text=ranks_text(holders.get(key, [])),
                stack_anchor=anchor,
            )
        )
    for name, (letter, text) in _SPECIAL.items():
        key = ("special", name)
        if key in holders and letter:
            legend.append(
                LegendEntry(
                    letter=letter, css="sp", top=text, where="", ranks_text=ranks_text(holders[key])
                )
            )
    return tuple(legend)


def _peers(procs: Sequence[Proc]) -> Set[Proc]:
    """Who should look alike: the ranks; without ranks, every non-launcher process."""
    ranks = {p for p in procs if p.info.rank is not None}
    return ranks if ranks else {p for p in procs if p.info.role not in ("launcher", "helper")}


def _majority(column: Sequence[Key]) -> Optional[Key]:
    """The signature most peers share, if more than half of (at least three) peers do."""
    present = [k for k in column if k != ("special", "absent")]
    if len(present) < 3:
        return None
    best = max(set(present), key=present.count)
    return best if present.count(best) * 2 > len(present) else None


def _describe(key: Key, stack_of: Dict[Key, str], reg: StackRegistry) -> str:
    if key[0] == "special":
        return _SPECIAL.get(key[1], ("", key[1]))[1]
    return top(reg.get(stack_of.get(key)))


def _column_label(samples: Sequence[int], a: int, b: int) -> str:
    return str(samples[a]) if a == b else f"{samples[a]}–{samples[b]}"


def _letter(n: int) -> str:
    text = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        text = chr(ord("A") + r) + text
    return text


def _classes(index: BundleIndex, reg: StackRegistry) -> Tuple[ClassView, ...]:
    if index.verdict is None:
        return ()
    out = []
    for rc in index.verdict.classes:
        if rc.hosts:
            members = set(rc.members())
            procs = [p for p in index.procs if p.key in members]
        else:  # a verdict from before classes named hosts
            procs = [p for p in index.procs if p.key[1] in rc.pids]
        if procs and (len(procs) >= len(rc.pids) or not rc.ranks):
            text = ranks_text(procs)
        elif rc.ranks:
            text = rank_set(rc.ranks)
        else:
            text = ""
        anchor, _ = reg.ref(rc.stack_id, f"class {rc.label}")
        out.append(
            ClassView(label=rc.label, ranks_text=text, signature=rc.signature, stack_anchor=anchor)
        )
    return tuple(out)
