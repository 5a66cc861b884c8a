"""Native work named by its call: a Python thread parked in one long native call while native
threads compute for it (a Rust tokenizer's rayon pool under ``encode_batch``, an OpenMP/BLAS
kernel, a C++ extension's workers). Its opposite, native *waits* that look like work (a thread
burning a core in a communication library's progress engine), is ``native_waits``.

The CPU burns in threads with no Python stack, named by /proc comm - usually the interpreter's
own name, so the verdict read "CPU-bound in `python`": the right state, a useless name. The
useful names are the innermost Python frame that entered native code (its stack never changes
while the call runs) and the native threads computing for it, by comm and count.

Pure: reads the samples of the few processes the verdict calls busy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from diag.model import Bundle, Frame, ProcessSample, ThreadSample, main_thread
from diag.verdict.features import ProcSignals
from diag.verdict.series_index import process_samples
from diag.verdict.thread_wait import frames_of
from diag.verdict.waits import stack_wait

THREAD_MIN_PCT = 10.0  # a native thread computing: at least this much of a core
MAX_NAMES = 4  # comm names shown


@dataclass(frozen=True)
class NativeCall:
    """The Python frame a native call was entered from, and who computes for it."""

    frame: Frame
    thread: str  # the Python thread in the call ("MainThread")
    pools: Tuple[Tuple[str, int], ...]  # (comm, threads) computing, busiest name first
    cpu_pct: float  # those native threads together, % of one core

    def text(self) -> str:
        """ "native code called from `tokenize_shard` (prep.py:36): 2 native threads
        (`python` x2) compute for it at 190% of a core while MainThread waits in that call"."""
        base = self.frame.filename.rsplit("/", 1)[-1]
        n = sum(count for _, count in self.pools)
        names = ", ".join(f"`{name}` x{count}" for name, count in self.pools[:MAX_NAMES])
        return (
            f"native code called from `{self.frame.name}` ({base}:{self.frame.line}): {n} "
            f"native thread{'s' if n != 1 else ''} ({names}) compute for it at "
            f"{self.cpu_pct:.0f}% of a core while {self.thread} waits in that one call"
        )


def _ticks(t: ThreadSample) -> int:
    return t.utime_ticks + t.stime_ticks


def _pct(first: ThreadSample, last: ThreadSample, span_s: float, clk: int) -> float:
    return max(0, _ticks(last) - _ticks(first)) * 100.0 / clk / span_s


def _caller(bundle: Bundle, series: Sequence[ProcessSample]) -> Optional[Tuple[Frame, str]]:
    """The Python thread whose stack stayed the same in every sample outside any known
    Python-level wait: the main thread when it qualifies, else the first that does."""
    main = main_thread(series[-1])
    tids = [t.tid for t in series[-1].threads if t.stack_id is not None]
    if main is not None and main.tid in tids:
        tids.remove(main.tid)
        tids.insert(0, main.tid)
    for tid in tids:
        seen = [t for ps in series for t in ps.threads if t.tid == tid]
        if len(seen) != len(series) or len({t.stack_id for t in seen}) != 1:
            continue
        frames = frames_of(bundle, seen[-1].stack_id)
        if frames and stack_wait(frames) is None:
            last = seen[-1]
            return frames[0], last.py_thread_name or last.name or str(tid)
    return None


def native_call(bundle: Bundle, p: ProcSignals) -> Optional[NativeCall]:
    """The native call a busy process is in, when native threads do its computing."""
    series = [ps for ps in process_samples(bundle, *p.key) if ps.status == "alive"]
    if len(series) < 2 or series[-1].t_s <= series[0].t_s:
        return None
    span_s, clk = series[-1].t_s - series[0].t_s, bundle.host.clk_tck or 100
    first = {t.tid: t for t in series[0].threads}
    native: Dict[str, List[float]] = {}
    python_pct = 0.0
    for t in series[-1].threads:
        before = first.get(t.tid)
        if before is None:
            continue
        pct = _pct(before, t, span_s, clk)
        if t.stack_id is None and t.py_thread_name is None:
            if pct >= THREAD_MIN_PCT:
                native.setdefault(t.name or "?", []).append(pct)
        else:
            python_pct += pct
    total = sum(sum(v) for v in native.values())
    # Only where the native threads dominate by far - where the verdict named their comm
    # ("python") instead of a frame (``features._hot``); elsewhere the frame is named already.
    if not native or python_pct * 4 > total:
        return None
    caller = _caller(bundle, series)
    if caller is None:
        return None
    pools = sorted(((name, len(v)) for name, v in native.items()), key=lambda kv: -kv[1])
    return NativeCall(caller[0], caller[1], tuple(pools), total)


def native_calls(bundle: Bundle, procs: Sequence[ProcSignals]) -> Dict[Tuple[str, int], str]:
    """key -> the sentence naming the native call, for the processes that are in one."""
    out: Dict[Tuple[str, int], str] = {}
    for p in procs:
        found = native_call(bundle, p)
        if found is not None:
            out[p.key] = found.text()
    return out
