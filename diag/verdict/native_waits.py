"""Native waits that look like work: a thread burning a core inside a communication library's
progress engine - an MPI receive polling in ``opal_progress``, UCX's ``ucp_worker_progress``, a
CUDA synchronize spinning on the host, NCCL's proxy thread - waits for a message; it does not
compute. The probe records where each running thread's PCs fell (``ThreadSample.native``:
library and ELF symbol) and whether they sat in a loop of a few bytes holding the CPU's
spin-wait hint (``NativeLocation.spin_hint``: x86 PAUSE - a busy-wait told by its code, in
any library); the packs of ``diag.frameworks`` declare which places are progress
engines (``NativeProgress``); this module matches the two. ``features`` then treats such a
thread like a Python poll loop on a peer: ranks that all sit there are deadlocked, not slow.

Pure: reads thread samples and the packs, nothing else.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from diag.frameworks import PACKS, NativeProgress
from diag.model import NativeLocation, NativeSpot, SpinHint, ThreadSample, is_system_library


@dataclass(frozen=True)
class NativeSpin:
    """A thread spinning in a pack's progress engine: where, and what the pack says it does."""

    library: str  # "libopen-pal.so.40.30.2"
    symbol: str  # "opal_progress"; "" when the engine's function has no symbol (a plugin)
    what: str  # "Open MPI's progress engine polls for a message"
    framework: str  # "MPI (Open MPI, MPICH)"; "" for a spin-wait told by its code alone
    hint: Optional[SpinHint] = None  # the loop's spin-wait hint ("pause"), when the code was read

    def label(self) -> str:
        """How a sentence names the place: "libopen-pal's `opal_progress`"."""
        lib = self.library.split(".so", 1)[0] or "?"
        return f"{lib}'s `{self.symbol}`" if self.symbol else f"`{lib}`"


_ENGINES: Tuple[Tuple[str, NativeProgress], ...] = tuple(
    (pack.name, engine) for pack in PACKS for engine in pack.native
)
_HINT_WAIT = "a {} loop of a few bytes polls memory until another party writes it"
SPIN_SHARE = 0.5  # of a thread's located samples, at least this many in an engine


def _matches(engine: NativeProgress, spot: NativeSpot) -> bool:
    if not spot.library or not any(frag in spot.library for frag in engine.libraries):
        return False
    if not engine.symbols:  # the whole library moves messages (a transport plugin)
        return True
    return bool(spot.symbol) and any(
        fnmatch.fnmatchcase(spot.symbol, pattern) for pattern in engine.symbols
    )


def _engine(spot: NativeSpot, thread_name: str) -> Optional[Tuple[str, NativeProgress]]:
    for framework, engine in _ENGINES:
        if _matches(engine, spot) or (
            engine.thread_names and thread_name.startswith(engine.thread_names)
        ):
            return framework, engine
    return None


def progress_spots(loc: NativeLocation, thread_name: str = "") -> List[Tuple[NativeSpin, int]]:
    """The spots of one location that lie in a progress engine, with their hits. A caller
    found on the stack counts only when no PC of the thread was in a named function of its
    own (a PC in libc, or in a static function of a stripped library): a thread computing
    in ``dgemm_kernel`` is not waiting because a stale return address says so. Where no
    engine matches but the PCs sat in a spin-wait loop (``spin_hint``), the function the loop
    is in: a busy-wait told by its code, whatever library it is in."""
    own_code = any(
        not spot.caller and spot.symbol and not is_system_library(spot.library)
        for spot in loc.spots
    )
    found: List[Tuple[NativeSpin, int]] = []
    hint = loc.spin_hint
    for spot in loc.spots:
        if spot.caller and own_code:
            continue
        hit = _engine(spot, thread_name)
        if hit is not None:
            framework, engine = hit
            spin = NativeSpin(spot.library, spot.symbol, engine.what, framework, hint)
            found.append((spin, spot.hits))
    if not found and hint is not None and loc.spots and not loc.spots[0].caller:
        top = loc.spots[0]  # the function the loop is in: the one most PCs fell in
        found.append(
            (NativeSpin(top.library, top.symbol, _HINT_WAIT.format(hint), "", hint), top.hits)
        )
    return found


def native_spin(series: Sequence[Optional[ThreadSample]]) -> Optional[NativeSpin]:
    """A thread (its sample in each alive sample of its process) that spins in a progress
    engine: running in every sample it was seen, its Python stack (if any) the same in all,
    located in two samples at least and in an engine in most of those. It waits for a
    message, like a Python poll loop; None otherwise. Named by the engine function with the
    most hits over the samples (the loop itself, ``opal_progress``, over the call it serves)."""
    seen = [t for t in series if t is not None]
    if len(seen) < 2 or len(seen) != len(series) or any(t.state != "R" for t in seen):
        return None
    if len({t.stack_id for t in seen}) != 1:
        return None
    located = [t.native for t in seen if t.native is not None and t.native.spots]
    per_sample = [progress_spots(t.native, t.name) for t in seen if t.native and t.native.spots]
    spinning = [found for found in per_sample if found]
    if len(located) < 2 or len(spinning) < max(2, SPIN_SHARE * len(located)):
        return None
    hits: Dict[NativeSpin, int] = {}
    for found in spinning:
        for spin, n in found:
            hits[spin] = hits.get(spin, 0) + n
    named = {spin: n for spin, n in hits.items() if spin.symbol} or hits
    return max(named, key=lambda spin: named[spin])
