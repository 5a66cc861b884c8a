"""A compact builder of sample series for table-driven classifier tests (no processes).

``Proc`` describes one process across the whole capture: its main-thread stack (one for all
samples, or one per sample), the CPU it burns per interval, kernel wait state, I/O and memory
rates, ports and status per sample. ``build`` turns a few of them into a real ``Bundle`` with
interned stacks, exactly the shape ``diag capture`` writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

from diag.model import (
    Bundle,
    Frame,
    GpuDevice,
    GpuProcess,
    GpuSample,
    HostInfo,
    IoCounters,
    LogSample,
    ProcessInfo,
    ProcessSample,
    Sample,
    ServedConn,
    Stack,
    Target,
    ThreadSample,
)
from diag.vocab import Role

StackSpec = Sequence[Tuple[str, str]]  # (function, filename), innermost first
TORCH = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
THREADING = "/usr/lib/python3.11/threading.py"
QUEUE = "/usr/lib/python3.11/queue.py"
SELECTORS = "/usr/lib/python3.11/selectors.py"
SOCKETSERVER = "/usr/lib/python3.11/socketserver.py"
CUDA = "/venv/lib/python3.11/site-packages/torch/cuda/__init__.py"
BARRIER_STACK = (("barrier", TORCH), ("refresh_cache", "/job/train.py"), ("main", "/job/train.py"))


@dataclass
class Thr:
    tid_offset: int
    stack: Optional[Union[StackSpec, List[StackSpec]]] = None  # None: native thread
    cpu_pct: float = 0.0
    state: str = "S"
    wchan: Optional[str] = "futex_wait_queue"
    syscall: Optional[str] = "futex"
    futex_addr: Optional[str] = None
    name: str = "worker"
    futex_op: Optional[int] = None
    wait_timed: Optional[bool] = None


@dataclass
class Proc:
    pid: int
    rank: Optional[int] = None
    world_size: Optional[int] = None
    rank_source: Optional[str] = None
    ppid: Optional[int] = 1
    role: Role = "rank"
    cmdline: Tuple[str, ...] = ("python", "train.py")
    stack: Union[StackSpec, List[StackSpec]] = (("main", "/job/train.py"),)
    cpu_pct: float = 0.0
    state: str = "S"
    wchan: Optional[str] = "futex_wait_queue"
    syscall: Optional[str] = "futex"
    futex_addr: Optional[str] = None
    futex_op: Optional[int] = None  # the main thread's futex op (0x80: private)
    wait_timed: Optional[bool] = None  # the main thread's blocking syscall has a timeout
    syscall_fd: Optional[int] = None  # the main thread's read/write fd
    threads: List[Thr] = field(default_factory=list)
    rss_mb: float = 500.0
    rss_mb_per_s: float = 0.0
    rchar_per_s: float = 0.0
    wchar_per_s: float = 0.0
    wcalls_per_s: float = 0.0  # write() calls (syscw): bytes per call tell data from chatter
    ports: Tuple[int, ...] = ()
    status: Optional[List[str]] = None  # per sample; default alive throughout
    exit_code: Optional[int] = None
    wakeups_per_s: float = 0.0
    python: bool = True
    env: Dict[str, str] = field(default_factory=dict)
    children_pct: float = 0.0  # CPU of reaped children, % of a core (cutime + cstime)
    served: Optional[List[Tuple[ServedConn, ...]]] = None  # per sample


def _stack_at(spec: Union[StackSpec, List[StackSpec], None], i: int) -> Optional[StackSpec]:
    if spec is None:
        return None
    if spec and not isinstance(spec[0][0], str):  # one stack per sample
        return spec[min(i, len(spec) - 1)]  # type: ignore[return-value]
    return spec  # type: ignore[return-value]


def build(
    procs: Sequence[Proc],
    n: int = 3,
    interval_s: float = 2.0,
    logs: Optional[Dict[str, List[Tuple[int, int, Tuple[str, ...]]]]] = None,
    gpu: Optional[List[Tuple[float, float, float, Tuple[int, ...]]]] = None,
    target_exit: Optional[int] = None,
) -> Bundle:
    """Build a bundle of ``n`` samples.

    ``logs``: path -> per-sample (size_bytes, lines, tail); ``gpu``: (util, power, limit, pids).
    """
    stacks: Dict[str, Stack] = {}
    ids: Dict[Tuple[Tuple[str, str], ...], str] = {}

    def intern(spec: Optional[StackSpec]) -> Optional[str]:
        if spec is None:
            return None
        key = tuple((f, fn) for f, fn in spec)
        if key not in ids:
            ids[key] = f"s{len(ids)}"
            stacks[ids[key]] = Stack(
                frames=tuple(
                    Frame(name=f, filename=fn, line=10 + k) for k, (f, fn) in enumerate(key)
                )
            )
        return ids[key]

    samples: List[Sample] = []
    t0 = 1000.0
    for i in range(n):
        t = t0 + i * interval_s
        pss: List[ProcessSample] = []
        for p in procs:
            status = p.status[i] if p.status else "alive"
            if status in ("zombie", "exited"):
                pss.append(
                    ProcessSample(
                        pid=p.pid,
                        t_s=t,
                        status=status,
                        state="Z",
                        exit_code=p.exit_code,
                        py_status="failed",
                    )
                )
                continue
            ticks = int(p.cpu_pct * i * interval_s)  # clk_tck 100: 1% of a core = 1 tick/s
            main = ThreadSample(
                tid=p.pid,
                name="python",
                state=p.state,
                utime_ticks=ticks,
                wchan=p.wchan,
                syscall=p.syscall,
                futex_addr=p.futex_addr,
                futex_op=p.futex_op,
                syscall_fd=p.syscall_fd,
                wait_timed=p.wait_timed,
                voluntary_ctxt_switches=int(p.wakeups_per_s * i * interval_s),
                py_thread_name="MainThread" if p.python else None,
                stack_id=intern(_stack_at(p.stack, i)) if p.python else None,
            )
            threads = [main]
            for th in p.threads:
                threads.append(
                    ThreadSample(
                        tid=p.pid + th.tid_offset,
                        name=th.name,
                        state=th.state,
                        utime_ticks=int(th.cpu_pct * i * interval_s),
                        wchan=th.wchan,
                        syscall=th.syscall,
                        futex_addr=th.futex_addr,
                        futex_op=th.futex_op,
                        wait_timed=th.wait_timed,
                        stack_id=intern(_stack_at(th.stack, i)),
                    )
                )
            total = sum(x.utime_ticks for x in threads)
            pss.append(
                ProcessSample(
                    pid=p.pid,
                    t_s=t,
                    status="alive",
                    state=p.state,
                    utime_ticks=total,
                    rss_bytes=int((p.rss_mb + p.rss_mb_per_s * i * interval_s) * 1e6),
                    io=IoCounters(
                        rchar=int(p.rchar_per_s * i * interval_s),
                        wchar=int(p.wchar_per_s * i * interval_s),
                        syscw=int(p.wcalls_per_s * i * interval_s),
                    ),
                    threads=tuple(threads),
                    listen_ports=p.ports,
                    children_ticks=int(p.children_pct * i * interval_s),
                    served=p.served[min(i, len(p.served) - 1)] if p.served else (),
                    py_status="ok" if p.python else "not-python",
                )
            )
        log_samples = tuple(
            LogSample(path=path, size_bytes=seq[i][0], lines=seq[i][1], tail=seq[i][2], inode=7)
            for path, seq in (logs or {}).items()
        )
        gpu_sample = None
        if gpu is not None:
            util, power, limit, pids = gpu[min(i, len(gpu) - 1)]
            gpu_sample = GpuSample(
                available=True,
                devices=(
                    GpuDevice(
                        index=0,
                        util_gpu_pct=util,
                        power_w=power,
                        power_limit_w=limit,
                        processes=tuple(GpuProcess(pid=x) for x in pids),
                    ),
                ),
            )
        samples.append(
            Sample(index=i, t_s=t, processes=tuple(pss), logs=log_samples, gpu=gpu_sample)
        )
    infos = tuple(
        ProcessInfo(
            pid=p.pid,
            ppid=p.ppid,
            role=p.role,
            rank=p.rank,
            rank_source=p.rank_source,
            world_size=p.world_size,
            cmdline=p.cmdline,
            name=p.cmdline[0] if p.cmdline else "",
            env=p.env,
        )
        for p in procs
    )
    return Bundle(
        created_s=t0,
        host=HostInfo(clk_tck=100, cpu_count=8),
        target=Target(root_pid=procs[0].pid if procs else None, exit_code=target_exit),
        processes=infos,
        stacks=stacks,
        samples=tuple(samples),
    )
