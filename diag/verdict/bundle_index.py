"""What the verdict derives from a bundle once and reads many times, in one index (#31,
"measured once": one index, not a memo in each module that wanted one).

Why at all: a merged bundle of 16,384 ranks asks the same questions of every rank - the pids
of ranks by host, a process's record in each sample, a class's answer, a thread's wait for a
stack - and derived per call that was most of a verdict's time (BENCHMARKS.md, issue 35).

Each entry is kept with the object it was derived from (the bundle, its samples, its
processes, its stacks - or a tuple of them) and answers only while that very object is asked
about again (compared by identity: a bundle is immutable, so the same object means the same
answer; a verdict re-judged on a copy derives again). ``judging`` - the scope ``classify``
opens for one verdict - empties the index when the outermost verdict ends, so no bundle is
kept alive here by a verdict that is over. A reader outside a verdict (the report's GPU table)
fills it too; the next verdict's end empties it.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Dict, Hashable, Iterator, List, Optional, Tuple, TypeVar, cast

T = TypeVar("T")

_entries: Dict[Hashable, Tuple[object, Any]] = {}
_depth: List[int] = [0]  # verdicts being judged (one inside another: only the outer empties)


def _same(held: object, source: object) -> bool:
    if isinstance(held, tuple) and isinstance(source, tuple):
        return len(held) == len(source) and all(a is b for a, b in zip(held, source))
    return held is source


def derived(name: Hashable, source: object, compute: Callable[..., T], *args: Any) -> T:
    """``compute(*args)``, once while ``source`` is the object asked about under ``name``.
    (The arguments, not a closure: the hot callers ask once per thread of 16,384 ranks.)"""
    hit = _entries.get(name)
    if hit is not None and (hit[0] is source or _same(hit[0], source)):
        return cast(T, hit[1])
    value = compute(*args)
    _entries[name] = (source, value)
    return value


def known(name: Hashable, source: object) -> Optional[Any]:
    """What was kept under ``name`` for ``source``; None if nothing (or for another source)."""
    hit = _entries.get(name)
    return hit[1] if hit is not None and _same(hit[0], source) else None


def keep(name: Hashable, source: object, value: Any) -> None:
    """Keep ``value`` under ``name`` for ``source`` (a finder that learned it on its way)."""
    _entries[name] = (source, value)


def forget(name: Hashable) -> None:
    _entries.pop(name, None)


@contextmanager
def judging() -> Iterator[None]:
    """One verdict's scope: when the outermost ends, the index is emptied."""
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1
        if _depth[0] == 0:
            _entries.clear()
