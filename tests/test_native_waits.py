"""Which native locations are waits (diag.verdict.native_waits): the packs' progress engines
matched against a thread's PCs, on records as the probe writes them; and the probe's own
timeout (the real-process tests are in test_native_waits_real.py)."""

from __future__ import annotations

import os
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

import msgspec
import pytest
from series import Proc, StackSpec, Thr, build

from diag.frameworks import PACKS
from diag.model import Bundle, NativeLocation, NativeSpot, ThreadSample
from diag.probes import native_location
from diag.probes.native_symbols import library_name
from diag.probes.procfs import ProcFS
from diag.verdict.features import extract
from diag.verdict.native_waits import native_spin, progress_spots


def _thread(*spots: NativeSpot, state: str = "R", stack: Optional[str] = "s1") -> ThreadSample:
    native = NativeLocation(spots=tuple(spots), pcs=sum(s.hits for s in spots), source="perf")
    return ThreadSample(tid=7, name="python", state=state, stack_id=stack, native=native)


VADER = NativeSpot(library="mca_btl_vader.so", hits=9)
OPAL = NativeSpot(library="libopen-pal.so.40.30.2", symbol="opal_progress", hits=3)
OPAL_UP = NativeSpot(library="libopen-pal.so.40.30.2", symbol="opal_progress", caller=True)
SYNC = NativeSpot(library="libopen-pal.so.40.30.2", symbol="ompi_sync_wait_mt")
GEMM = NativeSpot(library="libopenblas.so.0", symbol="dgemm_kernel_HASWELL", hits=12)
MEMCPY = NativeSpot(library="libc.so.6", symbol="__memcpy_avx_unaligned", hits=4)


def test_every_native_engine_names_a_library_and_says_what_it_does() -> None:
    engines = [e for p in PACKS for e in p.native]
    assert {p.key for p in PACKS if p.native} >= {"mpi", "ucx", "cuda"}
    for engine in engines:
        assert engine.libraries and engine.what
    for key in ("mpi", "ucx", "cuda"):
        (pack,) = [p for p in PACKS if p.key == key]
        assert pack.sources, key


def test_ranks_in_open_mpis_progress_engine_spin_named_by_the_loop() -> None:
    series: Sequence[Optional[ThreadSample]] = [
        _thread(VADER, OPAL, SYNC),
        _thread(VADER, OPAL_UP),
        _thread(VADER, OPAL),
    ]
    spin = native_spin(series)
    assert spin is not None
    assert spin.symbol == "opal_progress"
    assert spin.label() == "libopen-pal's `opal_progress`"
    assert "Open MPI" in spin.what


def test_a_thread_computing_in_its_own_code_is_no_spin_whatever_its_stack_holds() -> None:
    """A stale return address into MPI on the stack of a thread computing in BLAS."""
    loc = NativeLocation(spots=(GEMM, OPAL_UP), pcs=12, source="perf")
    assert progress_spots(loc) == []
    assert native_spin([_thread(GEMM, OPAL_UP), _thread(GEMM, OPAL_UP)]) is None


def test_a_pc_in_libc_is_a_spin_when_its_caller_is_the_engine() -> None:
    loc = NativeLocation(spots=(MEMCPY, OPAL_UP), pcs=4, source="perf")
    assert [s.symbol for s, _ in progress_spots(loc)] == ["opal_progress"]


def test_one_located_sample_a_moving_stack_or_a_sleeping_thread_is_not_enough() -> None:
    assert native_spin([_thread(VADER, OPAL), _thread(VADER, OPAL, stack="s2")]) is None
    assert native_spin([_thread(VADER, OPAL), _thread(VADER, OPAL, state="S")]) is None
    one = ThreadSample(tid=7, state="R", stack_id="s1")
    assert native_spin([_thread(VADER, OPAL), one, one]) is None
    assert native_spin([_thread(VADER, OPAL), None]) is None


def test_a_stuck_native_read_returns_the_threads_as_read_and_turns_the_probe_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read that blocks in the kernel (a library on a stalled mount) cannot be interrupted:
    the probe gives it up after its timeout, and stops for the capture after two."""
    release = threading.Event()

    def stuck(*_args: object, **_kwargs: object) -> Tuple[ThreadSample, ...]:
        release.wait(10.0)
        return ()

    monkeypatch.setattr(native_location, "attach_native", stuck)
    monkeypatch.setattr(native_location, "TIMEOUT_S", 0.1)
    probe = native_location.NativeProbe(ProcFS())
    threads = (ThreadSample(tid=1, state="R"), ThreadSample(tid=2, state="S"))
    try:
        started = time.monotonic()
        assert probe.attach(1, threads) == threads
        assert probe.attach(1, threads) == threads
        assert time.monotonic() - started < 2.0
        assert probe.off is not None and "stuck" in probe.off
        assert probe.attach(1, threads) == threads  # off: nothing started
    finally:
        release.set()


def test_attributions_begun_one_after_another_sleep_their_windows_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``begin`` returns at once and the attribution goes on in its thread: a worker starts
    the next process's while the last one's perf window runs, so N windows cost about one.
    A process with no running thread starts nothing and is ready at once."""
    window_s = 0.2

    def sampled(
        _procfs: object, _pid: int, threads: Tuple[ThreadSample, ...], *_: object
    ) -> Tuple[ThreadSample, ...]:
        time.sleep(window_s)
        return tuple(msgspec.structs.replace(t, name="located") for t in threads)

    monkeypatch.setattr(native_location, "attach_native", sampled)
    probe = native_location.NativeProbe(ProcFS())
    parked = (ThreadSample(tid=9, state="S"),)
    assert probe.begin(9, parked).ready() and probe.begin(9, parked).result() == parked
    started = time.monotonic()
    under_way = [probe.begin(pid, (ThreadSample(tid=pid, state="R"),)) for pid in range(1, 5)]
    assert time.monotonic() - started < window_s / 2
    assert not any(a.ready() for a in under_way)
    assert [a.result()[0].name for a in under_way] == ["located"] * 4
    assert time.monotonic() - started < 2 * window_s  # 4 windows at once, not 4 in a row
    assert under_way[0].result() is under_way[0].result()
    assert probe.hung == 0 and probe.off is None


def test_a_library_named_with_control_characters_is_shown_without_them() -> None:
    assert library_name("/tmp/x/lib\x1b[31mevil.so (deleted)") == "lib[31mevil.so"
    assert library_name("/usr/lib/libmpi.so.40") == "libmpi.so.40"


def test_a_refused_sampler_is_said_once_as_a_probe_note(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where perf_event_open is refused (a container's seccomp profile) a spinning rank has no
    native location and reads as CPU-bound: the capture says why, once per reader. (The
    refusal is faked: as root here the kernel grants it.)"""

    def refused(
        tids: Sequence[int], machine: str = "", why: Optional[List[str]] = None
    ) -> Dict[int, List[object]]:
        if why is not None:
            why.append("perf_event_open: EPERM")
        return {}

    monkeypatch.setattr(native_location, "sample_pcs", refused)
    probe = native_location.NativeProbe(ProcFS())
    me = os.getpid()
    threads = (ThreadSample(tid=me, state="R"),)
    assert probe.note() is None
    probe.attach(me, threads)
    note = probe.note()
    assert note is not None and "EPERM" in note and "CAP_PERFMON" in note
    probe.attach(me, threads)
    assert probe.note() is None  # said once


def _with_native(bundle: Bundle, tid: int, loc: NativeLocation) -> Bundle:
    """The bundle with thread ``tid`` located at ``loc`` in every sample (as the probe
    records a running thread)."""
    samples = []
    for s in bundle.samples:
        procs = []
        for ps in s.processes:
            threads = tuple(
                msgspec.structs.replace(t, native=loc) if t.tid == tid else t for t in ps.threads
            )
            procs.append(msgspec.structs.replace(ps, threads=threads))
        samples.append(msgspec.structs.replace(s, processes=tuple(procs)))
    return msgspec.structs.replace(bundle, samples=tuple(samples))


NCCL = NativeSpot(library="libnccl.so.2", symbol="ncclProxyProgress", hits=20)


def test_a_native_thread_in_a_progress_engine_spins_whatever_its_main_thread_does() -> None:
    """NCCL's proxy thread polling the network while the main thread computes: its CPU is
    communication's, not the step's - the compute is the main thread's alone."""
    steps: List[StackSpec] = [
        (("forward", "/job/model.py"), ("main", "/job/train.py")),
        (("backward", "/job/model.py"), ("main", "/job/train.py")),
        (("step", "/job/opt.py"), ("main", "/job/train.py")),
    ]
    proxy = Thr(tid_offset=3, stack=None, cpu_pct=100.0, state="R", name="NCCL Progress 0")
    rank = Proc(
        pid=500, rank=0, world_size=2, stack=steps, cpu_pct=80.0, state="R", threads=[proxy]
    )
    bundle = _with_native(build([rank]), 503, NativeLocation(spots=(NCCL,), pcs=20))
    (sig,) = extract(bundle)
    assert sig.spin_label == "libnccl's `ncclProxyProgress`"
    assert sig.spin_pct > 90.0 and sig.compute_pct < 90.0
    (plain,) = extract(build([rank]))  # without its location: as before, the proxy computes
    assert plain.spin_pct == 0.0
