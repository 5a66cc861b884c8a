"""Processes whose whole sample series read the same: the features are computed once a class.

A merged bundle of 16,384 ranks x 300 threads holds 15 million thread records, and every
per-thread finder of ``features.extract`` (poll loops, CPU by frame, lock waiters, timers)
walked each of them: 20 s of the verdict (issue 35). Ranks of a job that sit in the same
place have series that differ only in which process they are: host, pid and the clock of
their host. ``class_key`` is the series with exactly those taken out - every other field of
every sample, the threads with their tids, stacks, kernel state and tick counts, the
intervals between the samples as the finders compute them, and what the finders read of the
process's identity (a declared rank of a multi-rank job or not). Two processes with one key
give every finder the same input, so the features of one are the features of the other:
exact, not an approximation - a rank that differs in one tick of one thread is its own class.

What a key leaves out is what keeps it cheap: hashing a sample's thread tuple is C (msgspec
structs), ~0.1 us a thread, where one Python pass over the threads costs several times that -
and a merged bundle's equal tuples are one shared tuple, keyed by identity (``SharedThreads``).
"""

from __future__ import annotations

from typing import Callable, Dict, Hashable, List, Optional, Sequence, Set, Tuple, TypeVar

import msgspec

from diag.model import Bundle, ProcessInfo, ProcessSample, ThreadSample
from diag.verdict.bundle_index import derived, keep, known

# (sample index, the sample's time for the series, the process's record), as features reads it.
Entry = Tuple[int, float, ProcessSample]


def _gaps(times: List[float]) -> Tuple[float, ...]:
    """The differences the finders take: between consecutive samples, and last minus first
    (computed the same way, so equal keys mean equal floats, not just equal offsets)."""
    if len(times) < 2:
        return ()
    return (*(b - a for a, b in zip(times, times[1:])), times[-1] - times[0])


class SharedThreads:
    """Each distinct threads tuple of one bundle, by content, found by identity first: a merge
    shares equal tuples (``diag.bundle.intern``), so the 16,384 ranks of a class hash their
    15 million thread records not at all - one tuple of each distinct content is hashed, and
    any other tuple once, as before. Lives as long as one ``features.extract`` (the bundle
    holds every tuple meanwhile, so an id stays that tuple's)."""

    def __init__(self) -> None:
        self._by_id: Dict[int, Tuple[ThreadSample, ...]] = {}
        self._by_value: Dict[Tuple[ThreadSample, ...], Tuple[ThreadSample, ...]] = {}

    def token(self, threads: Tuple[ThreadSample, ...]) -> int:
        """The same number for equal tuples, another for unequal ones (TypeError: unhashable)."""
        shared = self._by_id.get(id(threads))
        if shared is None:
            shared = self._by_value.setdefault(threads, threads)
            self._by_id[id(threads)] = shared
        return id(shared)


def class_key(
    series: Sequence[Entry], info: ProcessInfo, shared: Optional[SharedThreads] = None
) -> Optional[Hashable]:
    """What ``features.extract`` reads of one process, identity and host clock left out;
    None when the series holds something unhashable (then the process is its own class).
    ``shared``: the bundle's threads tuples, so equal ones are compared by identity (keys
    made with one ``shared`` compare with each other only); None: by content."""
    try:
        threads = tuple(
            shared.token(ps.threads) if shared is not None else ps.threads for _, _, ps in series
        )
    except TypeError:
        return None
    stripped = tuple(
        msgspec.structs.replace(ps, pid=0, host="", t_s=0.0, threads=()) for _, _, ps in series
    )
    alive = [(t_s, ps) for _, t_s, ps in series if ps.status == "alive"]
    key = (
        tuple(index for index, _, _ in series),
        stripped,
        threads,
        _gaps([t_s for t_s, _ in alive]),
        _gaps([ps.t_s or 0.0 for _, ps in alive]),
        info.rank is None,
        info.world_size,
        info.rank_source,
    )
    try:
        return _Key(key)
    except TypeError:
        return None


class _Key:
    """A class key that hashes its (large) content once: a dict asks for the hash on every
    look-up, and a tuple does not keep it - at 16,384 ranks each hash is 900 thread records."""

    __slots__ = ("_hash", "value")

    def __init__(self, value: Tuple[object, ...]) -> None:
        self.value = value
        self._hash = hash(value)  # TypeError: something unhashable in the series

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and self._hash == other._hash and self.value == other.value


T = TypeVar("T")


def unless_found_nothing(
    bundle: Bundle, finder: str, series_class: Optional[int], find: Callable[[], Optional[T]]
) -> Optional[T]:
    """``find()``, or None at once when it found nothing for another process of the same class
    (``ProcSignals.series_class``). Only for a finder whose "nothing" is a function of the
    process's series alone - what it reads of the process's own signals checked before - so
    the 16,383 ranks beside a first one that shows no lock pile-up cost a set look-up each.
    Memoised on the bundle's samples, as ``series_index`` is."""
    if series_class is None:
        return find()
    seen: Set[Tuple[str, int]] = derived("proc_classes.nothing", bundle.samples, set)
    if (finder, series_class) in seen:
        return None
    found = find()
    if found is None:
        seen.add((finder, series_class))
    return found


def record_classes(bundle: Bundle, classes: Dict[Tuple[str, int], int]) -> None:
    """The class of each process (host, pid) of ``bundle``, as ``features.extract`` found."""
    keep("proc_classes.classes", bundle.samples, classes)


def series_class(bundle: Bundle, key: Tuple[str, int]) -> Optional[int]:
    """The class of a process of ``bundle`` (None: not known - its features were not read)."""
    classes: Optional[Dict[Tuple[str, int], int]] = known("proc_classes.classes", bundle.samples)
    return classes.get(key) if classes is not None else None


def per_class(bundle: Bundle, what: str, key: Tuple[str, int], compute: Callable[[], T]) -> T:
    """``compute()`` for one process, once per class: for a fact that is a function of the
    process's series alone (its threads, kernel state and counters, not its identity or its
    host's clock), as ``class_key`` defines the class."""
    cls = series_class(bundle, key)
    if cls is None:
        return compute()
    memo: Dict[Tuple[str, int], object] = derived("proc_classes.answers", bundle.samples, dict)
    if (what, cls) not in memo:
        memo[(what, cls)] = compute()
    return memo[(what, cls)]  # type: ignore[return-value]
