"""Native waits are waits (#31), on real processes: a thread burning a core inside a
communication library's progress engine waits for a message; it does not compute.

- The probe: a thread spinning in a known C function (zlib's ``crc32_z``, called through
  Python's ``zlib.crc32``) is located in that library and function, and is no spin-wait; a C
  ``pause`` loop in a library no pack knows is one, by its code; an address of our own
  process (libc's ``getpid``) maps to its ELF symbol.
- The verdict, on real Open MPI (Debian's openmpi-bin + mpi4py): two ranks deadlocked in the
  progress engine (rank 1 in ``MPI_Recv`` of a message never sent, rank 0 in ``MPI_Barrier``)
  are deadlocked, not "slow: CPU-bound", and the spinning symbol is named; two ranks
  exchanging messages in a loop while logging steps are progressing; a rank computing while its
  peer spins in MPI_Recv is slow (the computing rank named); the same deadlock over
  UCX (Open MPI's ucx PML) spins in ``ucp_worker_progress`` and is deadlocked too.

The MPI tests skip without mpirun or mpi4py (``make install`` installs both), and every test
that needs the kernel's sampler skips where perf_event_open is refused (a container's seccomp
profile, no CAP_PERFMON): /proc/PID/task/TID/syscall reads ``running`` for any runnable thread
(``task_current_syscall`` gives up on TASK_RUNNING), so perf is the only view of a spinning PC.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from conftest import PROGRAMS, run_diag, start_ready

from diag.probes.native_location import attach_native
from diag.probes.native_pc import sample_pcs, syscall_pc
from diag.probes.native_symbols import SymbolCache, find_mapping, parse_maps
from diag.probes.procfs import ProcFS
from diag.probes.threads import read_threads

pytestmark = pytest.mark.slow

MPIRUN = shutil.which("mpirun")
HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None
# Shared memory between the two ranks, no network transports probed, no CMA (ptrace-scoped in
# containers): what Open MPI needs to run two local ranks here.
MPI_ENV = {
    "OMPI_MCA_btl": "self,vader",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
    "OMPI_MCA_pml": "ob1",
    "OMPI_MCA_plm_rsh_agent": "false",
}
OPEN_MPI_ENGINE = {"opal_progress", "ompi_sync_wait_mt", "ompi_request_default_wait"}


def _perf_works() -> bool:
    """Whether the kernel's sampler answers here: one of our own threads spins for a moment."""
    stop = threading.Event()
    ready = threading.Event()
    tids: List[int] = []

    def spin() -> None:
        tids.append(threading.get_native_id())
        ready.set()
        deadline = time.monotonic() + 2.0
        while not stop.is_set() and time.monotonic() < deadline:
            pass

    worker = threading.Thread(target=spin, daemon=True)
    worker.start()
    ready.wait(2.0)
    try:
        return any(sample_pcs(tids) for _ in range(5))
    finally:
        stop.set()
        worker.join()


PERF = _perf_works()
needs_perf = pytest.mark.skipif(
    not PERF, reason="perf_event_open is refused here (seccomp or no CAP_PERFMON)"
)
needs_mpi = pytest.mark.skipif(
    MPIRUN is None or not HAVE_MPI4PY,
    reason="needs Open MPI (apt: openmpi-bin libopenmpi-dev) and mpi4py: `make install`",
)


def test_an_address_of_this_process_maps_to_its_elf_symbol() -> None:
    """libc's getpid, by its address in this very process: /proc/self/maps, then the ELF
    table of the file mapped there (read through /proc/PID/map_files)."""
    libc = ctypes.CDLL(None)
    addr = ctypes.cast(libc.getpid, ctypes.c_void_p).value
    assert addr is not None
    maps = parse_maps(Path("/proc/self/maps").read_text())
    mapping = find_mapping(maps, addr)
    assert mapping is not None and "libc" in mapping.path
    symbol = SymbolCache().symbol(os.getpid(), mapping, addr)
    assert symbol in ("getpid", "__getpid"), symbol


def test_syscall_pc_reads_the_pc_of_a_thread_off_its_cpu() -> None:
    assert syscall_pc("running") is None
    assert syscall_pc("-1 0x7ffd1000 0x7f00abcd") == (0x7F00ABCD, 0x7FFD1000)
    assert syscall_pc("202 0x1 0x189 0x0 0x0 0x0 0x0 0x7ffd2000 0x7f00beef") == (
        0x7F00BEEF,
        0x7FFD2000,
    )
    assert syscall_pc("") is None and syscall_pc(None) is None


CRC_SPIN = r"""
import zlib
buf = bytes(32 << 20)
print("READY", flush=True)
while True:
    zlib.crc32(buf)
"""


def _spinning_locations(pid: int) -> List[Any]:
    """The native locations of ``pid``'s running threads, sampled until two are read (at
    most six tries: a thread is sometimes caught off its CPU)."""
    procfs, cache = ProcFS(), SymbolCache()
    found: List[Any] = []
    for _ in range(6):
        threads = attach_native(procfs, pid, read_threads(procfs, pid, ""), cache)
        found += [t.native for t in threads if t.native is not None]
        if len(found) >= 2:
            break
    assert found, "no PC of the spinning thread was read"
    return found


@needs_perf
def test_a_thread_spinning_in_a_known_c_function_is_located_there() -> None:
    """Python's zlib.crc32 runs zlib's crc32_z: the thread's PCs fall in libz, in crc32_z."""
    started = start_ready([sys.executable, "-c", CRC_SPIN])
    try:
        found = _spinning_locations(started.pid)
        spots = [s for loc in found for s in loc.spots]
        assert any(s.library.startswith("libz.so") and s.symbol == "crc32_z" for s in spots), found
        assert all(loc.source == "perf" for loc in found)
        assert all(loc.spin_hint is None for loc in found), found  # a compute loop: no wait
    finally:
        started.stop()


PAUSE_SPIN = r"""
import ctypes, os, shutil, subprocess, tempfile
d = tempfile.mkdtemp(prefix="diag-pause-")
src, lib = os.path.join(d, "w.c"), os.path.join(d, "libw.so")
with open(src, "w") as f:
    f.write("int wait_word(volatile int *w) { while (!*w) __asm__ volatile(\"pause\");"
            " return *w; }")
subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
wait_word = ctypes.CDLL(lib).wait_word
shutil.rmtree(d)  # mapped still: nothing left behind
word = ctypes.c_int(0)
print("READY", flush=True)
wait_word(ctypes.byref(word))
"""


@needs_perf
@pytest.mark.skipif(
    shutil.which("cc") is None or os.uname().machine != "x86_64", reason="needs cc on x86_64"
)
def test_a_thread_spinning_in_a_pause_loop_is_told_a_spin_wait_by_its_code() -> None:
    """A C busy-wait (``while (!*w) pause;``) in a library no pack knows: its PCs sit in a
    loop of a few bytes with a PAUSE, read from its code (``spin_code``)."""
    started = start_ready([sys.executable, "-c", PAUSE_SPIN])
    try:
        found = _spinning_locations(started.pid)
        assert all(loc.spin_hint == "pause" for loc in found), found
        assert found[0].spots[0].library == "libw.so"
        assert found[0].spots[0].symbol == "wait_word"
    finally:
        started.stop()


def _mpirun(program: str, *args: str) -> List[str]:
    assert MPIRUN is not None
    flags = ["--allow-run-as-root", "--oversubscribe", "-np", "2"]
    return [MPIRUN, *flags, sys.executable, str(PROGRAMS / program), *args]


def _capture(argv: List[str], tmp_path: Path, env: Dict[str, str] = MPI_ENV) -> Dict[str, Any]:
    started = start_ready(argv, timeout_s=90.0, env=env)
    try:
        out = tmp_path / "bundle.json"
        done = run_diag(
            [
                "capture",
                "--pid",
                str(started.pid),
                "--count",
                "4",
                "--interval",
                "0.5",
                "-o",
                str(out),
            ],
            timeout_s=180.0,
        )
        assert done.returncode == 0, done.stderr
        bundle: Dict[str, Any] = json.loads(out.read_text())
        return bundle
    finally:
        started.stop()


def _rank_spots(bundle: Dict[str, Any]) -> List[Dict[str, Any]]:
    ranks = {p["pid"] for p in bundle["processes"] if p.get("rank") is not None}
    return [
        spot
        for s in bundle["samples"]
        for p in s["processes"]
        if p["pid"] in ranks
        for t in p.get("threads", [])
        if t.get("native")
        for spot in t["native"]["spots"]
    ]


@needs_mpi
@needs_perf
def test_ranks_spinning_in_mpi_progress_are_deadlocked_not_slow(tmp_path: Path) -> None:
    bundle = _capture(_mpirun("mpi_deadlock.py"), tmp_path)
    verdict = bundle["verdict"]
    summary = verdict["summary"]
    # The probe: the ranks' PCs lie in Open MPI's progress engine, named by its ELF symbol.
    spots = _rank_spots(bundle)
    assert any(s.get("symbol") == "opal_progress" for s in spots), spots
    assert any(s["library"].startswith("libopen-pal.so") for s in spots), spots
    # The verdict: a wait on a message that never comes, not CPU-bound work.
    assert verdict["state"] == "deadlocked", summary
    assert "CPU-bound" not in summary, summary
    assert re.search(r"libopen-pal's `(" + "|".join(OPEN_MPI_ENGINE) + r")`", summary), summary
    assert "spinning on a core waiting for a message" in summary, summary


def _has_ucx_pml() -> bool:
    """Open MPI built with UCX (Debian's is): ``ompi_info`` lists the ucx PML."""
    info = shutil.which("ompi_info")
    if info is None:
        return False
    listed = subprocess.run([info], capture_output=True, text=True, timeout=60)
    return "MCA pml: ucx" in listed.stdout


# UCX's PML selects only InfiniBand devices by default: any device, shared memory only.
UCX_ENV = {
    "OMPI_MCA_pml": "ucx",
    "OMPI_MCA_pml_ucx_tls": "any",
    "OMPI_MCA_pml_ucx_devices": "any",
    "OMPI_MCA_btl": "self",
    "UCX_TLS": "sm,self",
    "OMPI_MCA_plm_rsh_agent": "false",
}


@needs_mpi
@needs_perf
def test_ranks_spinning_in_ucx_worker_progress_are_deadlocked(tmp_path: Path) -> None:
    """The same deadlock over UCX (Open MPI's ucx PML): the ranks spin in UCX's worker
    progress (``ucp_worker_progress``, ``uct_*`` transports), a wait all the same."""
    if not _has_ucx_pml():
        pytest.skip("this Open MPI has no UCX PML")
    bundle = _capture(_mpirun("mpi_deadlock.py"), tmp_path, UCX_ENV)
    summary = bundle["verdict"]["summary"]
    spots = _rank_spots(bundle)
    assert any(s.get("symbol") == "ucp_worker_progress" for s in spots), spots
    assert bundle["verdict"]["state"] == "deadlocked", summary
    assert "spinning on a core waiting for a message" in summary, summary
    assert re.search(r"(libucp|libopen-pal|mca_pml_ucx)'?s? `", summary), summary


@needs_mpi
@needs_perf
def test_a_rank_computing_while_its_peer_spins_in_mpi_is_slow_not_deadlocked(
    tmp_path: Path,
) -> None:
    """The spinning receiver is a wait on the computing rank: the job is slow, the rank that
    computes is the one named as working, and the receiver's CPU is no work of its own."""
    bundle = _capture(_mpirun("mpi_straggler.py"), tmp_path)
    summary = bundle["verdict"]["summary"]
    assert bundle["verdict"]["state"] == "slow", summary
    # rank 0 works: "is CPU-bound", or "runs, slowly" where the host's load starves it
    assert re.search(r"rank 0 (is CPU-bound|runs)", summary), summary
    assert re.search(r"rank 1 waits (for it )?in libopen-pal's `", summary), summary


@needs_mpi
@needs_perf
def test_ranks_exchanging_messages_while_logging_steps_are_progressing(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    bundle = _capture(_mpirun("mpi_exchange.py", str(log)), tmp_path)
    verdict = bundle["verdict"]
    assert verdict["state"] == "progressing", verdict["summary"]
    assert log.read_text().count("step") >= 2
