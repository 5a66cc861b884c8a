"""Native waits that look like work: a thread burning a core inside a communication library's
progress engine - an MPI receive polling in ``opal_progress``, UCX's ``ucp_worker_progress``, a
CUDA synchronize spinning on the host, NCCL's proxy thread - waits for a message; it does not
compute. The probe records where each running thread's PCs fell (``ThreadSample.native``:
library and ELF symbol); the packs of ``diag.frameworks`` declare which places are progress
engines (``NativeProgress``); this module matches the two. ``features`` then treats such a
thread like a Python poll loop on a peer: ranks that all sit there are deadlocked, not slow.

Pure: reads thread samples and the packs, nothing else.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from diag.frameworks import PACKS, NativeProgress
from diag.model import NativeLocation, NativeSpot, ThreadSample


@dataclass(frozen=True)
class NativeSpin:
    """A thread spinning in a pack's progress engine: where, and what the pack says it does."""

    library: str  # "libopen-pal.so.40.30.2"
    symbol: str  # "opal_progress"; "" when the engine's function has no symbol (a plugin)
    what: str  # "Open MPI's progress engine polls for a message"
    framework: str  # "MPI (Open MPI, MPICH)"

    def label(self) -> str:
        """How a sentence names the place: "libopen-pal's `opal_progress`"."""
        lib = self.library.split(".so", 1)[0] or "?"
        return f"{lib}'s `{self.symbol}`" if self.symbol else f"`{lib}`"


_ENGINES: Tuple[Tuple[str, NativeProgress], ...] = tuple(
    (pack.name, engine) for pack in PACKS for engine in pack.native
)
SPIN_SHARE = 0.5  # of a thread's located samples, at least this many in an engine


def _matches(engine: NativeProgress, spot: NativeSpot) -> bool:
    if not spot.library or not any(frag in spot.library for frag in engine.libraries):
        return False
    if not engine.symbols:  # the whole library moves messages (a transport plugin)
        return True
    return bool(spot.symbol) and any(
        fnmatch.fnmatchcase(spot.symbol, pattern) for pattern in engine.symbols
    )


def progress_spot(loc: NativeLocation, thread_name: str = "") -> Optional[NativeSpin]:
    """The progress engine one location lies in, named by its best spot: a named function
    first (``opal_progress`` over a transport plugin's anonymous loop), then the most hits."""
    found: List[Tuple[int, NativeSpin]] = []
    for spot in loc.spots:
        for framework, engine in _ENGINES:
            if _matches(engine, spot):
                spin = NativeSpin(spot.library, spot.symbol, engine.what, framework)
                found.append((spot.hits + (1000 if spot.symbol else 0), spin))
                break
    if not found and thread_name:
        for framework, engine in _ENGINES:
            if engine.thread_names and thread_name.startswith(engine.thread_names):
                return NativeSpin(loc.library, loc.symbol, engine.what, framework)
    return max(found, key=lambda kv: kv[0])[1] if found else None


def native_spin(series: Sequence[Optional[ThreadSample]]) -> Optional[NativeSpin]:
    """A thread (its sample in each alive sample of its process) that spins in a progress
    engine: running in every sample it was seen, its Python stack (if any) the same in all,
    located in two samples at least and in an engine in most of those. It waits for a
    message, like a Python poll loop; None otherwise."""
    seen = [t for t in series if t is not None]
    if len(seen) < 2 or len(seen) != len(series) or any(t.state != "R" for t in seen):
        return None
    if len({t.stack_id for t in seen}) != 1:
        return None
    located = [t for t in seen if t.native is not None and t.native.spots]
    spins = [s for s in (progress_spot(t.native, t.name) for t in located if t.native) if s]
    if len(located) < 2 or len(spins) < max(2, SPIN_SHARE * len(located)):
        return None
    named = [s for s in spins if s.symbol]
    return max(named or spins, key=(named or spins).count)
