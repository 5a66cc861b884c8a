"""Where each running thread of a process is in native code: ``ThreadSample.native``.

Only threads in state R are looked at - a sleeping thread's wait is in its kernel state
already; a running one's "work" may be a communication library polling for a message. Their
PCs come from the kernel's sampler (``native_pc.sample_pcs``: a few ms, the target never
stopped) or, where perf is refused or the thread did not run in the window, from
``/proc/PID/task/TID/syscall`` read once more - which gives a PC only if the thread has
blocked or stopped since (the kernel answers ``running`` for any runnable thread). Each PC maps
to a library and function (``native_symbols``). A PC inside the C library or the loader
(``sched_yield``, ``clock_gettime``, a syscall wrapper) says little: the first return address
on its stack outside them names the caller (``NativeSpot.caller``). PCs that cluster in a
loop of a few bytes get that code read: a spin-wait hint in it (``spin_code``) makes the
thread a waiter whatever library it is in (``NativeLocation.spin_hint``).

A failure here leaves the threads as they were: the rest of the sample never depends on it.
"""

from __future__ import annotations

import os
import platform
import struct
import threading
import time
from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple

import msgspec

from diag.model import (
    NativeLocation,
    NativeSource,
    NativeSpot,
    ThreadSample,
    is_system_library,
)
from diag.probes.native_pc import (
    PcSample,
    follows_call,
    read_code,
    read_stack,
    sample_pcs,
    syscall_pc,
)
from diag.probes.native_symbols import (
    MAPS_MAX_BYTES,
    Mapping,
    SymbolCache,
    find_mapping,
    library_name,
    parse_maps,
)
from diag.probes.procfs import ProcFS
from diag.probes.spin_code import spin_hint

BUDGET_S = 0.25  # symbol work a process a sample; past it, locations keep their library only
MAX_SPOTS = 6
CALLERS = 2  # return addresses kept from a stack copy
SYSCALL_READS = 1  # /proc/PID/task/TID/syscall reads of a thread perf gave nothing for


class _Locator:
    """The PC -> (library, symbol) work of one process at one sample, within ``BUDGET_S``."""

    def __init__(
        self, pid: int, maps: List[Mapping], cache: SymbolCache, root: str, machine: str
    ) -> None:
        self.pid, self.maps, self.cache, self.root = pid, maps, cache, root
        self.machine = machine or platform.machine()
        self.deadline = time.monotonic() + BUDGET_S
        self.memo: Dict[int, Tuple[str, str]] = {}
        self.calls: Dict[int, bool] = {}

    def locate(self, pc: int) -> Optional[Tuple[str, str]]:
        """(library, symbol) of ``pc``; None when it lies in no executable file mapping."""
        hit = self.memo.get(pc)
        if hit is not None:
            return hit
        mapping = find_mapping(self.maps, pc)
        if mapping is None:
            return None
        symbol = ""
        if time.monotonic() < self.deadline:
            symbol = self.cache.symbol(self.pid, mapping, pc, self.root)
        self.memo[pc] = (library_name(mapping.path), symbol)
        return self.memo[pc]

    def read(self, addr: int, size: int) -> bytes:
        """``size`` bytes of the process's code at ``addr`` (b"" when unreadable)."""
        return read_code(self.pid, addr, size, self.root)

    def _after_call(self, addr: int) -> bool:
        """Whether the instruction before ``addr`` is a call: what makes a stack word a return
        address rather than a stale pointer to code (a callback, a vtable entry)."""
        hit = self.calls.get(addr)
        if hit is None:
            code = read_code(self.pid, addr - 8, 8, self.root)
            hit = self.calls[addr] = len(code) == 8 and follows_call(code, self.machine)
        return hit

    def callers(self, stack: bytes) -> List[Tuple[str, str]]:
        """The first ``CALLERS`` words of a stack copy that are return addresses (a call
        before them) into named functions outside the system libraries: the nearest callers
        of a C-library call or of an unnamed static function. Heuristic - an uninitialised
        slot may hold a stale return address from an earlier call - which is why only such
        PCs ask for callers, and the verdict trusts them only there."""
        out: List[Tuple[str, str]] = []
        for (word,) in struct.iter_unpack("<Q", stack[: len(stack) // 8 * 8]):
            if word < 4096:
                continue
            mapping = find_mapping(self.maps, word)
            if mapping is None or is_system_library(library_name(mapping.path)):
                continue
            if not self._after_call(word):
                continue
            found = self.locate(word)
            if found is not None and found[1] and found not in out:
                out.append(found)
                if len(out) >= CALLERS:
                    break
        return out


def _location(loc: _Locator, samples: Sequence[PcSample], source: NativeSource) -> NativeLocation:
    spots: Counter[Tuple[str, str, bool]] = Counter()
    for s in samples:
        found = loc.locate(s.pc) or ("", "")
        spots[(found[0], found[1], False)] += 1
        # A PC in the C library, or in a function the file's table does not name (a static
        # one of a stripped library): its nearest caller says more.
        if (is_system_library(found[0]) or not found[1]) and s.stack:
            for lib, sym in loc.callers(s.stack):
                spots[(lib, sym, True)] += 1
    ranked = sorted(spots.items(), key=lambda kv: (kv[0][2], -kv[1]))
    return NativeLocation(
        spots=tuple(
            NativeSpot(library=lib, symbol=sym, hits=n, caller=up)
            for (lib, sym, up), n in ranked[:MAX_SPOTS]
        ),
        pcs=len(samples),
        source=source,
    )


def _from_syscall(procfs: ProcFS, pid: int, tid: int) -> List[PcSample]:
    """The PC of a thread caught off its CPU, read up to ``SYSCALL_READS`` times."""
    for _ in range(SYSCALL_READS):
        text = procfs.try_read_text(pid, "task", str(tid), "syscall")
        found = syscall_pc(text)
        if found is not None:
            pc, sp = found
            return [PcSample(pc, read_stack(pid, sp, str(procfs.root)))]
    return []


def attach_native(
    procfs: ProcFS,
    pid: int,
    threads: Tuple[ThreadSample, ...],
    cache: SymbolCache,
    machine: str = "",
    refused: Optional[List[str]] = None,
) -> Tuple[ThreadSample, ...]:
    """``threads`` with ``native`` set on the running ones whose PC could be read;
    ``refused`` gets why the kernel's sampler said no, when it did."""
    running = [t.tid for t in threads if t.state == "R"]
    if not running or not procfs.live:
        return threads
    raw = procfs.read_bytes_capped(pid, "maps", MAPS_MAX_BYTES)
    maps = parse_maps(raw.decode("utf-8", "replace"))
    if not maps:
        return threads
    loc = _Locator(pid, maps, cache, str(procfs.root), machine)
    perf = sample_pcs(running, machine, refused)
    found: Dict[int, NativeLocation] = {}
    for tid in running:
        samples = perf.get(tid)
        source: NativeSource = "perf"
        if not samples:
            samples, source = _from_syscall(procfs, pid, tid), "syscall"
        if samples:
            found[tid] = _location(loc, samples, source)
            hint = spin_hint([s.pc for s in samples], loc.read, loc.machine)
            if hint is not None:
                found[tid] = msgspec.structs.replace(found[tid], spin_hint=hint)
    if not found:
        return threads
    return tuple(
        msgspec.structs.replace(t, native=found[t.tid]) if t.tid in found else t for t in threads
    )


TIMEOUT_S = 1.0  # the whole attribution of one process at one sample

_Priority = Tuple[int, int, int]  # (policy, real-time priority, nice) of a thread


def _own_priority() -> Optional[_Priority]:
    try:
        return (
            os.sched_getscheduler(0),
            os.sched_getparam(0).sched_priority,
            os.getpriority(os.PRIO_PROCESS, 0),
        )
    except OSError:
        return None


def _take_priority(priority: Optional[_Priority]) -> None:
    """The calling thread at ``priority``: the attribution's thread runs at the priority of
    the thread that waits for it. Why: a thread started by a real-time shard worker (reset on
    fork) starts at the normal policy and nice 0, and on a host whose cores the job keeps busy
    - where running threads are what this probe is for - it waited behind them while the
    worker, blocked on it, held its own core idle (a 110 ms first sample was seen)."""
    if priority is None:
        return
    policy, rt_priority, nice = priority
    try:
        os.sched_setscheduler(0, policy, os.sched_param(rt_priority))
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:
        pass  # no privilege: it runs at the priority it was given


MAX_HUNG = 2  # attributions given up on before the probe stops for the capture


class NativeAttribution:
    """One process's attribution under way (``NativeProbe.begin``; ``threads_as_read``: the
    threads it started from, without locations): its thread samples the
    running threads' PCs - a perf window of a few ms spent asleep - while the caller goes on
    with the process's other reads, or with the next process's. ``result`` waits for it, up to
    ``TIMEOUT_S`` from its start."""

    def __init__(
        self,
        probe: Optional[NativeProbe],
        threads: Tuple[ThreadSample, ...],
        box: List[Tuple[ThreadSample, ...]],
        worker: Optional[threading.Thread],
    ) -> None:
        self._probe, self.threads_as_read, self._box, self._worker = probe, threads, box, worker
        self._started = time.monotonic()
        self._done: Optional[Tuple[ThreadSample, ...]] = None if worker else threads

    def ready(self) -> bool:
        """Whether ``result`` would answer without waiting."""
        return self._done is not None or bool(self._box)

    def result(self) -> Tuple[ThreadSample, ...]:
        """The threads with their native locations; as read when the attribution failed or
        overran (it then counts towards ``MAX_HUNG``). Answers the same when asked again."""
        if self._done is not None:
            return self._done
        assert self._worker is not None and self._probe is not None
        self._worker.join(max(self._started + TIMEOUT_S - time.monotonic(), 0.0))
        if self._box:
            self._done = self._box[0]
        else:
            self._probe.gave_up()
            self._done = self.threads_as_read
        return self._done


class NativeProbe:
    """``attach_native`` for one capture, under ``TIMEOUT_S`` and failing alone: its reads
    (the target's maps, its libraries' symbol tables) can block in the kernel - a map lock
    held by a thread stuck in D state, a library on a stalled NFS or FUSE mount. Such a read
    cannot be interrupted: it is left in a daemon thread and the threads are returned as
    read. After ``MAX_HUNG`` of those the probe is off for the rest of the capture (``off``
    says why), so a sick host does not collect stuck threads.

    ``begin`` starts it and ``NativeAttribution.result`` ends it, so a caller overlaps the
    perf window's sleep with other work (``attach`` is both at once): a busy job's every rank
    has a running thread, and sampled one process after another, a reader slept 8-24 ms a
    rank with its core idle."""

    def __init__(self, procfs: ProcFS, machine: str = "") -> None:
        self.procfs, self.machine = procfs, machine
        self.cache = SymbolCache()
        self.hung = 0
        self.off: Optional[str] = None
        self._refused: List[str] = []
        self._told = False

    def note(self) -> Optional[str]:
        """Why running threads get no native location in this capture (perf refused, reads
        stuck), once: a probe failure of its own, so a rank read as CPU-bound says it may be
        spinning in a progress loop diag could not see."""
        if self._told:
            return None
        if self.off is None and not self._refused:
            return None
        self._told = True
        if self.off is not None:
            return self.off
        return (
            f"{self._refused[0]}: running threads' native locations not read (root or "
            "CAP_PERFMON, and perf_event_open allowed by the seccomp profile) - a rank "
            "spinning in a progress loop (MPI, UCX, CUDA) reads as CPU-bound"
        )

    def gave_up(self) -> None:
        """One attribution overran ``TIMEOUT_S``: after ``MAX_HUNG`` the probe is off."""
        self.hung += 1
        if self.hung >= MAX_HUNG and self.off is None:
            self.off = f"native locations: {self.hung} reads stuck over {TIMEOUT_S:g} s"

    def begin(self, pid: int, threads: Tuple[ThreadSample, ...]) -> NativeAttribution:
        """Start the attribution of ``pid``'s running threads in a thread of its own."""
        if self.off is not None or not any(t.state == "R" for t in threads):
            return NativeAttribution(None, threads, [], None)
        box: List[Tuple[ThreadSample, ...]] = []
        priority = _own_priority()

        def work() -> None:
            _take_priority(priority)
            try:
                why = None if self._refused else self._refused  # the first refusal is enough
                got = attach_native(self.procfs, pid, threads, self.cache, self.machine, why)
                box.append(got)
            except Exception:  # a probe's failure is its own: the threads stay as read
                box.append(threads)

        worker = threading.Thread(target=work, name="diag-native-pc", daemon=True)
        pending = NativeAttribution(self, threads, box, worker)
        worker.start()
        return pending

    def attach(self, pid: int, threads: Tuple[ThreadSample, ...]) -> Tuple[ThreadSample, ...]:
        return self.begin(pid, threads).result()
