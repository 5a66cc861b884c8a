"""The story a synthetic bundle tells: its stacks, environment, verdict and NCCL evidence.

Data for bench/synth.py, kept apart so the generator itself stays readable: the stacks a
torchrun job shows while training and while stuck (all_reduce on the healthy ranks, a
DataLoader queue on the odd one), the environment torchrun sets, the verdict the scenario
deserves, and the Flight Recorder / NCCL-log records a real stuck job leaves.
"""

from __future__ import annotations

import hashlib
from typing import Dict, List, Optional, Tuple

from diag.model import (
    CollectiveRecord,
    Evidence,
    Frame,
    LogSignal,
    RankClass,
    RankCollectives,
    RankNcclLog,
    Stack,
    Suspect,
    Verdict,
)

T0_S = 1_780_000_000.0
LAUNCHER_PID = 4000
CLK_TCK = 100
TRAIN = "/opt/job/train.py"
_C10D = "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py"
_LOADER = "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py"
_QUEUE = "/usr/lib/python3.11/queue.py"
_THREADING = "/usr/lib/python3.11/threading.py"


def make_stack(*frames: Tuple[str, str, int]) -> Stack:
    return Stack(frames=tuple(Frame(name=n, filename=f, line=ln) for n, f, ln in frames))


def stack_id_of(stack: Stack) -> str:
    """Content hash, as capture interns stacks: equal stacks share one id."""
    text = "|".join(f"{f.name}:{f.filename}:{f.line}" for f in stack.frames)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


_OUTER = (("main", TRAIN, 140), ("<module>", TRAIN, 160))
STEP_STACKS = (
    make_stack(("forward", TRAIN, 41), ("train_step", TRAIN, 84), *_OUTER),
    make_stack(
        ("backward", "/usr/lib/python3/site-packages/torch/_tensor.py", 626),
        ("train_step", TRAIN, 86),
        *_OUTER,
    ),
    make_stack(
        ("step", "/usr/lib/python3/site-packages/torch/optim/adamw.py", 210),
        ("train_step", TRAIN, 90),
        *_OUTER,
    ),
)
ALLREDUCE = make_stack(
    ("all_reduce", _C10D, 2806),
    ("wrapper", "/usr/lib/python3/site-packages/torch/distributed/c10d_logger.py", 81),
    ("sync_grads", TRAIN, 66),
    ("train_step", TRAIN, 88),
    *_OUTER,
)
QUEUE_GET = make_stack(
    ("wait", _THREADING, 331),
    ("get", _QUEUE, 180),
    ("_get_data", _LOADER, 1133),
    ("_next_data", _LOADER, 1294),
    ("__next__", _LOADER, 631),
    ("train_step", TRAIN, 80),
    *_OUTER,
)
PIN_MEMORY = make_stack(
    ("wait", _THREADING, 331),
    ("get", _QUEUE, 180),
    (
        "_pin_memory_loop",
        "/usr/lib/python3/site-packages/torch/utils/data/_utils/pin_memory.py",
        54,
    ),
    ("run", _THREADING, 982),
    ("_bootstrap_inner", _THREADING, 1045),
    ("_bootstrap", _THREADING, 1002),
)


def env(rank: int, ranks: int, devices: Optional[int] = None) -> Dict[str, str]:
    """A rank's environment; ``devices``: the GPUs it sees (default: one a rank, all ranks -
    a list as long as the job, which at 65,536 ranks made building the inputs quadratic)."""
    seen = ranks if devices is None else devices
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(ranks),
        "LOCAL_WORLD_SIZE": str(ranks),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
        "NCCL_DEBUG": "WARN",
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(seen)),
        "OMP_NUM_THREADS": "4",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HF_TOKEN": "[redacted]",
    }


def verdict(scenario: str, ranks: int, odd_rank: int, pids: List[int], stuck_at: int) -> Verdict:
    if scenario == "progressing":
        return Verdict(
            state="progressing",
            confidence=0.9,
            summary=f"All {ranks} ranks change stacks between samples and CPU/log output grows.",
            evidence=(
                Evidence(
                    signal="stacks-changing",
                    detail="main-thread stacks differ between consecutive samples on every rank",
                    ranks=tuple(range(ranks)),
                    section="matrix",
                ),
                Evidence(
                    signal="logs-growing", detail="train.log grows every sample", section="logs"
                ),
            ),
        )
    others = tuple(r for r in range(ranks) if r != odd_rank)
    return Verdict(
        state="deadlocked",
        confidence=0.86,
        summary=(
            f"Rank {odd_rank} waits on its DataLoader queue while the other {ranks - 1} ranks "
            "spin in all_reduce; nothing has changed since sample "
            f"{stuck_at}."
        ),
        evidence=(
            Evidence(
                signal="odd-rank-stack",
                detail=f"rank {odd_rank} is the only rank outside all_reduce",
                ranks=(odd_rank,),
                section="matrix",
            ),
            Evidence(
                signal="collective-wait",
                detail="ranks spin at 100% CPU in all_reduce with an unchanged stack",
                ranks=others,
                section="timelines",
            ),
            Evidence(
                signal="gpu-busy-low-power",
                detail="GPU utilization reads 100% at ~90 W: NCCL kernels waiting, not computing",
                section="gpu",
            ),
            Evidence(
                signal="logs-stalled",
                detail=f"no new training log lines since sample {stuck_at}",
                section="logs",
            ),
            Evidence(
                signal="futex-wait",
                detail=f"rank {odd_rank} main thread blocked in futex (queue.get, no timeout)",
                ranks=(odd_rank,),
                pids=(pids[odd_rank],),
                section=f"rank-{odd_rank}",
            ),
        ),
        suspects=(
            Suspect(
                pid=pids[odd_rank],
                rank=odd_rank,
                reason="only rank not in all_reduce: waits for a DataLoader batch",
            ),
        ),
        classes=(
            RankClass(
                signature="all_reduce",
                label="A",
                ranks=others,
                pids=tuple(p for r, p in enumerate(pids) if r != odd_rank),
                stack_id=stack_id_of(ALLREDUCE),
            ),
            RankClass(
                signature="queue.get",
                label="B",
                ranks=(odd_rank,),
                pids=(pids[odd_rank],),
                stack_id=stack_id_of(QUEUE_GET),
            ),
        ),
    )


def collectives(
    ranks: int, odd_rank: int, pids: List[int], stuck_at: int
) -> Tuple[RankCollectives, ...]:
    """Flight Recorder: the odd rank's last collective lags by one (it never reached it)."""
    out = []
    for r, pid in enumerate(pids):
        last = stuck_at + (0 if r == odd_rank else 1)
        recent = tuple(
            CollectiveRecord(
                seq=seq,
                op="nccl:all_reduce",
                state="completed" if seq < stuck_at + 1 else "started",
                created_s=T0_S + seq * 30.0,
                sizes="[[4096, 1024]]",
            )
            for seq in range(max(1, last - 3), last + 1)
        )
        out.append(
            RankCollectives(
                rank=r,
                pg="0",
                pg_ranks=tuple(range(ranks)),
                pid=pid,
                source=f"/tmp/fr/rank_{r}",
                last_enqueued_seq=last,
                last_started_seq=last,
                last_completed_seq=stuck_at,
                recent=recent,
            )
        )
    return tuple(out)


def nccl_logs(ranks: int, odd_rank: int, pids: List[int], stuck_at: int) -> Tuple[RankNcclLog, ...]:
    """torch's watchdog lines on the waiting ranks: they name the waiters, not the culprit."""
    out = []
    for r, pid in enumerate(pids):
        if r == odd_rank:
            continue
        line = (
            f"[rank{r}]:[E ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={stuck_at + 1}, OpType=ALLREDUCE) ran for "
            "600000 milliseconds before timing out."
        )
        signal = LogSignal(
            kind="watchdog_timeout", count=1, last_line=line, path="/var/log/job/train.log"
        )
        out.append(
            RankNcclLog(
                rank=r, pid=pid, signals=(signal,), timeout_seq=stuck_at + 1, timeout_op="ALLREDUCE"
            )
        )
    return tuple(out)
