"""Wording for verdicts: who-waits-where phrases (rank ranges and sizes come from ``text.units``).

Kept apart from the decision logic so the classifier reads as rules, and so the summary style
("ranks 1-3 wait in `barrier`") is the same in every state.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from diag.text.roles import FrameworkRole, framework_role, named
from diag.text.units import ranges, rank_set, size
from diag.verdict.features import ProcSignals
from diag.verdict.polling import POLLED_COLLECTIVE
from diag.vocab import VerdictState

__all__ = [
    "group_by_wait",
    "pct",
    "peers_waiting_tail",
    "ranges",
    "short_label",
    "size",
    "verb",
    "waits_phrase",
    "where",
    "who",
]

LABEL_CHARS = 80  # a frame name the target chose is cut here in a verdict sentence


def summary_of(state: VerdictState, text: str) -> str:
    """A verdict's summary: its state, then its sentence ("deadlocked: rank 3 ..."). The one
    place the two are joined; the state stays a field of the decision and of the verdict."""
    return f"{state}: {text}"


def who(procs: Sequence[ProcSignals]) -> str:
    """ "rank 0", "ranks 1-3", "pid 4242", "pids 1,2", or a mix; a process its framework
    names by title or command line by that name ("scheduler TP0", "detokenizer (pid 2206)",
    "main (HTTP + tokenizer, pid 2190)"; several of one role: "schedulers (ranks 0-7)")."""
    out: List[str] = []
    roles: Dict[str, List[Tuple[ProcSignals, FrameworkRole]]] = {}
    plain: List[ProcSignals] = []
    for p in procs:
        role = framework_role(p.info.cmdline, p.info.name)
        if role is None:
            plain.append(p)
        else:
            roles.setdefault(role.role, []).append((p, role))
    for group in roles.values():
        if len(group) == 1:
            p, role = group[0]
            out.append(named(role, p.rank, p.pid))
        elif all(p.rank is not None for p, _ in group):
            ranks_ = [p.rank for p, _ in group if p.rank is not None]
            out.append(f"{group[0][1].role}s ({rank_set(ranks_)})")
        else:
            out.append(f"{group[0][1].role}s ({_pids([p.pid for p, _ in group])})")
    ranks = [p.rank for p in plain if p.rank is not None]
    pids = [p.pid for p in plain if p.rank is None]
    if ranks:
        out.append(rank_set(ranks))
    if pids:
        out.append(_pids(pids))
    return " and ".join(out) if out else "no process"


def _pids(pids: Sequence[int]) -> str:
    shown = ",".join(str(p) for p in sorted(pids)[:6])
    more = f" (+{len(pids) - 6})" if len(pids) > 6 else ""
    return ("pid " if len(pids) == 1 else "pids ") + shown + more


def verb(procs: Sequence[ProcSignals], singular: str, plural: str) -> str:
    return singular if len(procs) == 1 else plural


def short_label(text: str, limit: int = LABEL_CHARS) -> str:
    """A frame name as a sentence shows it: at most ``limit`` characters, cut with "…" (a
    hostile 4 KiB function name must not make a 4 KiB verdict line)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def where(p: ProcSignals) -> str:
    """The main thread's wait in words: "`all_reduce` ← `train_step`", each name cut to
    ``LABEL_CHARS``."""
    return _where(p, short_label)


def _where(p: ProcSignals, shown: Callable[[str], str]) -> str:
    if p.main_wait is None:
        return "an unknown place"
    w = p.main_wait
    label, caller = shown(w.label), shown(w.caller)
    if w.kind == "native-peer":
        return f"a C call from `{caller}` (a c10d store or `work.wait()`: py-spy sees the caller)"
    if w.label == POLLED_COLLECTIVE:
        return f"a collective busy-polled from `{caller}` (a gloo worker waits on a peer)"
    if w.kind in ("collective", "poll") and w.native:  # spinning in C (native_waits)
        spin = p.native_spin
        if spin is not None and spin.hint is not None and not spin.framework:  # told by code
            spun = f"{w.label}, a busy-wait in a {spin.hint.upper()} loop"
        else:
            spun = f"{w.label}, spinning on a core waiting for a message"
        return f"{spun} (called from `{caller}`)" if w.caller else spun
    return f"`{label}` ← `{caller}`" if w.caller and w.caller != w.label else f"`{label}`"


def waits_phrase(groups: Sequence[Sequence[ProcSignals]]) -> str:
    """ "ranks 1-3 wait in `barrier`; rank 4 waits in `recv`"."""
    parts = []
    for procs in groups:
        if procs:
            parts.append(f"{who(procs)} {verb(procs, 'waits', 'wait')} in {where(procs[0])}")
    return "; ".join(parts)


def group_by_wait(procs: Sequence[ProcSignals]) -> List[List[ProcSignals]]:
    groups: Dict[str, List[ProcSignals]] = {}
    for p in procs:
        key = _where(p, str)  # full names: two waits cut to one text stay apart
        groups.setdefault(key, []).append(p)
    return sorted(groups.values(), key=lambda g: -len(g))


def pct(value: Optional[float]) -> str:
    return f"{value:.0f}%" if value is not None else "?"


def log_moved(name: str, grew_lines: int, grew_bytes: int, redrawn: Sequence[str]) -> str:
    """How a log that grew moved: by lines, or - none new - by its progress bar redrawn in
    place (``redrawn``: its count before and after) or its last line rewritten (a bar diag
    cannot read, a line still being written) - never "grew 0 lines"."""
    if not redrawn and grew_lines == 0:
        return f"log {name} rewrote its last line in place ({size(grew_bytes)}, no new line)"
    if not redrawn:
        return f"log {name} grew {grew_lines} lines ({size(grew_bytes)})"
    before, after = redrawn
    if before == after:
        return f"log {name} only redrew its progress bar at the same count ({after})"
    return f"log {name}'s progress bar went {before} -> {after} (redrawn in place)"


def peers_waiting_tail(slow: Sequence[ProcSignals], alive: Sequence[ProcSignals]) -> str:
    """ "; ranks 0, 2 wait for it in `all_reduce`": the live processes other than ``slow``
    whose main thread waits on a peer, at most two groups - the tail of every "slow because
    of the machine" sentence (a limit, a low priority, memory pressure, a starved rank)."""
    named = {p.key for p in slow}
    waiters = [p for p in alive if p.key not in named and p.main_family == "peer"]
    it = "it" if len(slow) == 1 else "them"
    return "".join(
        f"; {who(g)} {verb(g, 'waits', 'wait')} for {it} in {where(g[0])}"
        for g in group_by_wait(waiters)[:2]
    )
