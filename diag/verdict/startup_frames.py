"""What the frames of a process's last sample say of its start-up phase (``startup``): a
compiler's, a converter's, a loader's frame, and the others by name.

Why a module of its own: these scans read a list of (frame name, filename) only, and
``startup._procs`` makes one such list per class of processes whose series read the same
(``ProcSignals.series_class``) - so each scan is memoised by the list (``names_fact``): the
16,384 ranks of one class scan 300 threads' frames once, not once each (issue 35).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from diag.frameworks import union
from diag.verdict.bundle_index import derived, forget
from diag.verdict.startup_signs import (
    _COMPILE_FILES,
    _COMPILE_NAMES,
    _CONVERT_NAMES,
    _CONVERT_PREFIXES,
    _LOADER_FILES,
    _LOADER_NAMES,
    _NOT_CONVERT,
    _NOT_CONVERT_FILES,
)

Names = List[Tuple[str, str]]

# (what, id of the list) -> (the list, the answer), in the verdict's index: the list is held,
# so its id stays its own while the entry lives; a hit is checked by identity. Emptied by
# ``startup_phases`` around its pass (the lists are that pass's own).
_FACTS = "startup_frames.facts"
_SCOPE = object()  # the facts' source: they are of no one bundle part


def names_fact(what: str, names: Names, find: Callable[[Names], Optional[str]]) -> Optional[str]:
    """``find(names)``, once per list of frames (and ``what``)."""
    facts: Dict[Tuple[str, int], Tuple[object, Optional[str]]] = derived(_FACTS, _SCOPE, dict)
    hit = facts.get((what, id(names)))
    if hit is not None and hit[0] is names:
        return hit[1]
    found = find(names)
    facts[(what, id(names))] = (names, found)
    return found


def clear_names_facts() -> None:
    forget(_FACTS)


def frame_named(names: Sequence[Tuple[str, str]], want: frozenset[str]) -> Optional[str]:
    return next((n for n, _ in names if n in want), None)


def compile_frames(names: Sequence[Tuple[str, str]]) -> Optional[str]:
    for name, filename in names:
        if any(marker in filename for marker in _COMPILE_FILES):
            return f"frame `{name}` in {filename.rsplit('/', 2)[-2]}/{filename.rsplit('/', 1)[-1]}"
    found = frame_named(names, _COMPILE_NAMES)
    return f"frame `{found}`" if found else None


def convert_frames(names: Sequence[Tuple[str, str]]) -> Optional[str]:
    for name, filename in names:
        if name in _NOT_CONVERT or any(f in filename for f in _NOT_CONVERT_FILES):
            continue
        if name in _CONVERT_NAMES or name.lower().startswith(_CONVERT_PREFIXES):
            return f"frame `{name}`"
    return None


def loader_frames(names: Sequence[Tuple[str, str]]) -> Optional[str]:
    for name, filename in names:
        if name in _LOADER_NAMES or any(f in filename for f in _LOADER_FILES):
            return name
        for sign, called in union.LOADER_FRAMES:
            if union.matches((sign,), name, filename):
                return called
    return None
