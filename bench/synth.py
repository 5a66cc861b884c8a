"""Synthetic bundles of any size, for render tests, golden files and benchmarks.

Real captures of an 8-rank job for an hour cannot be recorded in a test, yet the report must
stay fast and small for them. ``make_bundle`` builds a deterministic, realistic torchrun job:
a launcher, ``ranks`` workers with ``threads`` threads each (main thread, a pin-memory thread,
native autograd/NCCL/OpenMP threads parked on futexes), logs, NVML samples and a verdict. In
the ``deadlock`` scenario every rank trains for the first third of the samples, then all ranks
but one spin in ``all_reduce`` (CPU 100 %, GPU "100 %" at low power: the NCCL trap) while the
odd rank waits on its DataLoader queue. ``progressing`` keeps all ranks stepping.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from bench import synth_story as story
from bench.synth_story import (
    ALLREDUCE,
    CLK_TCK,
    LAUNCHER_PID,
    PIN_MEMORY,
    QUEUE_GET,
    STEP_STACKS,
    T0_S,
    TRAIN,
    stack_id_of,
)
from diag.model import (
    Bundle,
    GpuDevice,
    GpuProcess,
    GpuSample,
    HostInfo,
    IoCounters,
    LogSample,
    ProbeFailure,
    ProcessInfo,
    ProcessSample,
    Sample,
    Stack,
    Target,
    ThreadSample,
    Verdict,
)

_NATIVE_NAMES = ("pt_autograd_0", "cuda-EvtHandlr", "pt_nccl_watchdg", "python")


def _main_stack(scenario: str, rank: int, odd_rank: int, stuck: bool, index: int) -> Stack:
    if not stuck:
        return STEP_STACKS[(index + rank) % len(STEP_STACKS)]
    return QUEUE_GET if rank == odd_rank else ALLREDUCE


def _threads(
    pid: int,
    threads: int,
    main: Stack,
    spinning: bool,
    index: int,
    active: int,
    stacks: Dict[str, Stack],
) -> Tuple[ThreadSample, ...]:
    """``active``: samples in which the main thread was on CPU so far."""
    main_id = stack_id_of(main)
    pin_id = stack_id_of(PIN_MEMORY)
    stacks[main_id] = main
    stacks[pin_id] = PIN_MEMORY
    main_ticks = active * 2900 + pid % 7
    out: List[ThreadSample] = [
        ThreadSample(
            tid=pid,
            name="python",
            state="R" if spinning else "S",
            utime_ticks=main_ticks,
            stime_ticks=main_ticks // 20,
            wchan=None if spinning else "futex_wait_queue",
            syscall="running" if spinning else "futex",
            syscall_nr=None if spinning else 202,
            futex_addr=None if spinning else "0x7f3a2c00a120",
            futex_op=None if spinning else 0x189,
            py_thread_name="MainThread",
            stack_id=main_id,
            py_active=spinning,
            owns_gil=spinning,
        )
    ]
    if threads > 1:
        out.append(
            ThreadSample(
                tid=pid + 1,
                name="python",
                state="S",
                utime_ticks=index * 2,
                wchan="futex_wait_queue",
                syscall="futex",
                syscall_nr=202,
                futex_addr="0x7f3a2c00b880",
                futex_op=0x189,
                py_thread_name="Thread-1 (_pin_memory_loop)",
                stack_id=pin_id,
                py_active=False,
                owns_gil=False,
            )
        )
    for k in range(2, threads):
        name = _NATIVE_NAMES[min(k - 2, len(_NATIVE_NAMES) - 1)]
        omp = name == "python"
        out.append(
            ThreadSample(
                tid=pid + k,
                name=name,
                state="S",
                utime_ticks=index * (1 if omp else 0) + k,
                wchan="futex_wait_queue" if omp or k < 4 else "do_epoll_wait",
                syscall="futex" if omp or k < 4 else "epoll_wait",
                syscall_nr=202 if omp or k < 4 else 232,
                futex_addr="0x55d0c0de0040" if omp else (f"0x7f3a{k:08x}" if k < 4 else None),
                futex_op=0x80 if omp or k < 4 else None,
            )
        )
    return tuple(out)


def _log(index: int, stuck_at: int, ranks: int, odd_rank: int, scenario: str) -> LogSample:
    steps = index if scenario == "progressing" else min(index, stuck_at)
    lines = 12 + steps * ranks
    head = tuple(
        ["[launcher] starting 8 workers" if ranks == 8 else f"[launcher] starting {ranks} workers"]
        + [f"[rank{r}] init process group backend=nccl" for r in range(min(ranks, 7))]
    )
    tail_steps = range(max(0, steps - 3), steps)
    tail = tuple(
        f"[rank{r}] step {s} loss {2.5 - s * 0.001:.3f}" for s in tail_steps for r in (0, 1)
    )
    if scenario == "deadlock" and index > stuck_at + 2:
        tail = (*tail, f"[rank{odd_rank}] DataLoader worker 3 is slow to produce batch")
    return LogSample(
        path="/var/log/job/train.log",
        pids=(LAUNCHER_PID,),
        size_bytes=lines * 48,
        lines=lines + (1 if len(tail) and tail[-1].endswith("batch") else 0),
        mtime_s=T0_S + steps * 30.0,
        inode=131077,
        head=head,
        tail=tail,
    )


def _gpu(rank_pids: List[int], index: int, stuck: bool) -> GpuSample:
    devices = tuple(
        GpuDevice(
            index=i,
            uuid=f"GPU-0000{i}",
            name="NVIDIA H100 80GB HBM3",
            util_gpu_pct=100.0 if stuck else 90.0 + (index + i) % 9,
            util_mem_pct=0.0 if stuck else 40.0 + (index * 3 + i) % 20,
            mem_used_bytes=60_000_000_000 + i * 1_000_000,
            mem_total_bytes=85_520_000_000,
            power_w=(92.0 + i) if stuck else 610.0 - (index + i) % 40,
            power_limit_w=700.0,
            sm_clock_mhz=1980,
            temperature_c=48.0 if stuck else 66.0,
            processes=(GpuProcess(pid=pid, used_memory_bytes=59_000_000_000),),
        )
        for i, pid in enumerate(rank_pids)
    )
    return GpuSample(available=True, driver_version="550.54.15", devices=devices)


def make_bundle(
    ranks: int = 8,
    threads: int = 60,
    samples: int = 120,
    interval_s: float = 30.0,
    scenario: str = "deadlock",
    odd_rank: int = 2,
    hosts: int = 1,
    gpus: bool = True,
    with_verdict: bool = True,
) -> Bundle:
    """A deterministic bundle of a torchrun job; same arguments, same bytes."""
    odd_rank = min(odd_rank, ranks - 1)
    deadlock = scenario == "deadlock"
    stuck_at = samples // 3 if deadlock else samples + 1
    pids = [LAUNCHER_PID + 1 + r * 100 for r in range(ranks)]
    host_of = [f"node-{r * hosts // ranks}" if hosts > 1 else "" for r in range(ranks)]
    cmd = ("torchrun", "--nproc-per-node", str(ranks), TRAIN, "--lr", "3e-4")
    infos: List[ProcessInfo] = [
        ProcessInfo(
            pid=LAUNCHER_PID, name="torchrun", cmdline=cmd, role="launcher", exe="/usr/bin/python3"
        )
    ]
    for r, pid in enumerate(pids):
        infos.append(
            ProcessInfo(
                pid=pid,
                host=host_of[r],
                ppid=LAUNCHER_PID,
                name="python3",
                exe="/usr/bin/python3",
                cmdline=("/usr/bin/python3", "-u", TRAIN, "--lr", "3e-4"),
                role="rank",
                rank=r,
                local_rank=r,
                world_size=ranks,
                rank_source="env:RANK",
                env=story.env(r, ranks),
                start_time_s=T0_S - 60.0,
            )
        )
    stacks: Dict[str, Stack] = {}
    out: List[Sample] = []
    for i in range(samples):
        t_s = T0_S + i * interval_s
        stuck = i >= stuck_at
        procs: List[ProcessSample] = [
            ProcessSample(
                pid=LAUNCHER_PID,
                t_s=t_s,
                state="S",
                utime_ticks=50 + i,
                rss_bytes=90_000_000,
                num_threads=3,
                py_status="ok",
                listen_ports=(29500,),
            )
        ]
        for r, pid in enumerate(pids):
            spinning = not stuck or r != odd_rank
            main = _main_stack(scenario, r, odd_rank, stuck, i)
            active = i if spinning else min(i, stuck_at)
            ths = _threads(pid, threads, main, spinning, i, active, stacks)
            ticks = sum(t.utime_ticks for t in ths)
            progressed = min(i, stuck_at)
            procs.append(
                ProcessSample(
                    pid=pid,
                    host=host_of[r],
                    t_s=t_s + 0.01 * r,
                    state="R" if spinning else "S",
                    utime_ticks=ticks,
                    stime_ticks=ticks // 20,
                    rss_bytes=6_000_000_000 + progressed * 10_000_000 + r * 1_000_000,
                    vms_bytes=40_000_000_000,
                    num_threads=threads,
                    io=IoCounters(rchar=progressed * 500_000_000 + r, wchar=progressed * 1_000_000),
                    threads=ths,
                    py_status="ok",
                )
            )
        failures: Tuple[ProbeFailure, ...] = ()
        if i == min(5, samples - 1):
            failures = (
                ProbeFailure(
                    probe="py-spy",
                    reason="timed out after 10.0 s",
                    duration_s=10.0,
                    pid=pids[-1],
                    sample=i,
                ),
            )
        out.append(
            Sample(
                index=i,
                t_s=t_s,
                duration_s=0.4,
                processes=tuple(procs),
                logs=(_log(i, stuck_at, ranks, odd_rank, scenario),),
                gpu=_gpu(pids, i, stuck and scenario == "deadlock")
                if gpus
                else GpuSample(available=False, reason="NVML: no NVIDIA driver"),
                failures=failures,
                probe_timings_s={"procfs": 0.012, "py-spy": 0.31, "nvml": 0.05, "logs": 0.002},
            )
        )
    verdict: Optional[Verdict] = (
        story.verdict(scenario, ranks, odd_rank, pids, stuck_at) if with_verdict else None
    )
    return Bundle(
        created_s=T0_S,
        host=HostInfo(
            hostname="gpu-node-17",
            kernel="6.8.0-45-generic",
            machine="x86_64",
            cpu_count=96,
            clk_tck=CLK_TCK,
            python_version="3.11.7",
            diag_version="0.1.0",
            pyspy_version="0.4.1",
            boot_time_s=T0_S - 86400,
        ),
        target=Target(
            root_pid=LAUNCHER_PID,
            command=cmd,
            log_paths=("/var/log/job/train.log",),
            hosts=tuple(sorted({h for h in host_of if h})),
        ),
        processes=tuple(infos),
        stacks=stacks,
        samples=tuple(out),
        failures=(ProbeFailure(probe="ports", reason="ss not found", duration_s=0.001),),
        verdict=verdict,
        collectives=story.collectives(ranks, odd_rank, pids, stuck_at) if deadlock else (),
        nccl_logs=story.nccl_logs(ranks, odd_rank, pids, stuck_at) if deadlock else (),
    )
