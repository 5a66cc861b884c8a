"""Bundles built by the test helpers for the rules of the table that no real program on a
machine without a GPU reaches: a row's example ``fixture:NAME`` is ``FIXTURES[NAME]()``
(tests/test_rule_table.py, docs/rules.md). Every other example is a recorded capture."""

from __future__ import annotations

from typing import Callable, Dict, Sequence

import msgspec

from diag.model import Bundle, GpuDevice, GpuProcess, GpuSample, GpuXid
from tests.series import CUDA, TORCH, Proc, build

ALL_REDUCE = (("all_reduce", TORCH), ("train_step", "/job/train.py"), ("main", "/job/train.py"))
SYNC = (("synchronize", CUDA), ("train_step", "/job/train.py"), ("main", "/job/train.py"))


def h100(index: int, pid: int, **fields: object) -> GpuDevice:
    """One H100 as NVML reports it under load (1,980 of 1,980 MHz, no throttle reason),
    holding ``pid``; ``fields`` override (``sm_clock_mhz``, ``clock_event_mask``, ``xids``...)."""
    base = GpuDevice(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        util_gpu_pct=100.0,
        power_w=520.0,
        power_limit_w=700.0,
        sm_clock_mhz=1980,
        sm_clock_max_mhz=1980,
        clock_event_mask=0,
        ecc_volatile_uncorrected=0,
        ecc_volatile_corrected=0,
        pcie_replays=0,
        processes=(GpuProcess(pid=pid, used_memory_bytes=70 << 30),),
    )
    return msgspec.structs.replace(base, **fields)


def with_gpus(bundle: Bundle, per_sample: Sequence[Sequence[GpuDevice]]) -> Bundle:
    """``bundle`` with sample i's NVML answer ``per_sample[i]`` (the last one repeated)."""
    samples = tuple(
        msgspec.structs.replace(
            s,
            gpu=GpuSample(
                available=True,
                driver_version="550.54.15",
                devices=tuple(per_sample[min(i, len(per_sample) - 1)]),
            ),
        )
        for i, s in enumerate(bundle.samples)
    )
    return msgspec.structs.replace(bundle, samples=samples)


def gpu_ranks(world: int, odd: int, odd_stack: object = ALL_REDUCE) -> Bundle:
    """``world`` ranks (pids 100 + rank), all in ``all_reduce`` at 25 % of a core except rank
    ``odd``, whose main thread sits in ``odd_stack``."""
    procs = [
        Proc(
            pid=100 + r,
            rank=r,
            world_size=world,
            rank_source="env:RANK",
            stack=odd_stack if r == odd else ALL_REDUCE,  # type: ignore[arg-type]
            cpu_pct=25.0,
        )
        for r in range(world)
    ]
    return build(procs, n=3)


def gpu_fell_off_bus() -> Bundle:
    """Four ranks; GPU 3 (rank 3's) reports XID 79 in the second sample and rank 3 stays in
    ``torch.cuda.synchronize`` on the lost device while ranks 0-2 wait in ``all_reduce``."""
    healthy = [h100(r, 100 + r) for r in range(4)]
    fallen = [*healthy[:3], h100(3, 103, xids=(GpuXid(xid=79, t_s=1002.0),))]
    return with_gpus(gpu_ranks(4, 3, SYNC), [healthy, fallen, healthy])


def gpu_busy_at_idle_power() -> Bundle:
    """One rank in its forward pass, its GPU 100 % busy at 70 W of 700 W in every sample and
    nothing else moving: an NCCL kernel spinning for a peer (tests/series.py's GPU samples,
    as nvidia-smi reports them)."""
    rank = Proc(
        pid=100,
        rank=0,
        world_size=1,
        rank_source="env:RANK",
        stack=(("forward", "/job/model.py"), ("main", "/job/train.py")),
    )
    return build([rank], gpu=[(100.0, 70.0, 700.0, (100,))])


FIXTURES: Dict[str, Callable[[], Bundle]] = {
    "gpu_busy_at_idle_power": gpu_busy_at_idle_power,
    "gpu_fell_off_bus": gpu_fell_off_bus,
}
