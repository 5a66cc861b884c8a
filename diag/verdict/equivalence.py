"""Rank equivalence classes by main-thread stack signature (the idea of LLNL's STAT).

In a hung collective job most ranks sit in the same place; the rank whose stack differs is the
usual culprit ("ranks 0,1,3: `all_reduce`; rank 2: `barrier` <- `refresh_cache`"). The
signature is the function names of the main thread's last stack plus the line numbers of user
frames: two ranks in the same library call from different call sites (a mismatched collective)
land in different classes, while library line numbers (which differ across versions) do not
split them.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from diag.frames import is_library, signature_text, stack_signature
from diag.model import Bundle, Frame, RankClass
from diag.verdict.features import ProcSignals, frames_of
from diag.verdict.waits import WRAPPERS, short_name


def signature(frames: Sequence[Frame]) -> str:
    """The class key: the shared stack signature (``diag.frames``) as a call path."""
    return signature_text(stack_signature(frames))


def label(frames: Sequence[Frame], depth: int = 2) -> str:
    """``all_reduce ← train_step (train.py:42)``: the innermost meaningful frames."""
    names: List[str] = []
    for f in frames:
        if short_name(f.name) in WRAPPERS:
            continue
        if is_library(f):
            names.append(f"`{f.name}`")
        else:
            base = f.filename.rsplit("/", 1)[-1]
            names.append(f"`{f.name}` ({base}:{f.line})")
        if len(names) >= depth:
            break
    return " ← ".join(names) if names else "(empty stack)"


def rank_classes(bundle: Bundle, procs: Sequence[ProcSignals]) -> List[RankClass]:
    """Classes of the given processes, largest first; dead and stackless ones get their own."""
    groups: Dict[str, List[ProcSignals]] = {}
    labels: Dict[str, Tuple[str, Optional[str]]] = {}
    # A stack id is a content hash: its signature and label are read once, not once a rank.
    read: Dict[Optional[str], Tuple[str, str]] = {}
    for p in procs:
        if p.dead:
            sig, text, stack_id = "<exited>", "exited / zombie", None
        else:
            stack_id = next((s for s in reversed(p.main_stack_ids) if s), None)
            known = read.get(stack_id)
            if known is None:
                frames = frames_of(bundle, stack_id)
                if frames:
                    known = signature(frames), label(frames)
                else:
                    known = "<no python stack>", "no Python stack"
                read[stack_id] = known
            sig, text = known
        groups.setdefault(sig, []).append(p)
        labels[sig] = (text, stack_id)
    ordered = sorted(
        groups.items(),
        key=lambda kv: (
            -len(kv[1]),
            min((p.rank if p.rank is not None else 1 << 30) for p in kv[1]),
        ),
    )
    out: List[RankClass] = []
    for sig, members in ordered:
        members.sort(key=lambda p: (p.rank if p.rank is not None else 1 << 30, p.pid))
        text, stack_id = labels[sig]
        out.append(
            RankClass(
                signature=sig,
                label=text,
                ranks=tuple(p.rank for p in members if p.rank is not None),
                pids=tuple(p.pid for p in members),
                stack_id=stack_id,
                hosts=tuple(p.key[0] for p in members) if any(p.key[0] for p in members) else (),
            )
        )
    return out


def odd_classes(classes: Sequence[RankClass]) -> List[RankClass]:
    """The classes that differ from a clear majority (none when all classes are the same size)."""
    if len(classes) < 2:
        return []
    biggest = len(classes[0].pids)
    if all(len(c.pids) == biggest for c in classes):
        return []
    return [c for c in classes[1:] if len(c.pids) < biggest]
