"""The straggler analysis on built series: who the ranks wait for, and when nobody is named."""

from __future__ import annotations

from typing import List, Optional, Tuple

from series import TORCH, Proc, build

from diag.model import Bundle, CollectiveRecord, RankCollectives
from diag.text.units import EN_DASH
from diag.verdict.features import extract
from diag.verdict.stragglers import MAX_RANK_LOADS, straggler_analysis

ALLREDUCE = (("all_reduce", TORCH), ("train_step", "/job/train.py"), ("main", "/job/train.py"))
COMPUTE = (("forward", "/job/model.py"), ("train_step", "/job/train.py"), ("main", "/job/train.py"))


def _rank(rank: int, stacks: List[Tuple[Tuple[str, str], ...]], cpu: float, world: int) -> Proc:
    return Proc(
        pid=100 + rank,
        rank=rank,
        world_size=world,
        rank_source="env:RANK",
        stack=[list(s) for s in stacks],  # type: ignore[misc]
        cpu_pct=cpu,
        state="R",
    )


def _analysis(bundle: Bundle) -> Optional[object]:
    return straggler_analysis(bundle, extract(bundle))


def test_the_rank_the_others_wait_for_is_named_with_figures() -> None:
    procs = [_rank(r, [ALLREDUCE, ALLREDUCE, COMPUTE, ALLREDUCE], 22.0, 4) for r in (0, 1, 3)]
    procs.append(_rank(2, [COMPUTE] * 4, 95.0, 4))
    result = straggler_analysis(b := build(procs, n=4), extract(b))
    assert result is not None
    assert result.suspects == (2,) and result.basis == "samples"
    assert result.summary.startswith("straggler: rank 2 computes 100 % of the samples")
    assert f"ranks 0{EN_DASH}1, 3 wait for it in `all_reduce` 75 % of the samples" in result.summary
    assert result.ranks[0].rank == 2  # the straggler's row first
    waiter = next(r for r in result.ranks if r.rank == 0)
    assert waiter.peer_wait_samples == 3 and waiter.wait_op == "`all_reduce`"
    assert round(waiter.main_cpu_pct) == 22


def test_balanced_job_names_no_straggler() -> None:
    phases = [COMPUTE, ALLREDUCE, COMPUTE]
    procs = [_rank(r, phases[r % 2 :] + phases[: r % 2], 60.0, 4) for r in range(4)]
    result = straggler_analysis(b := build(procs, n=3), extract(b))
    assert result is not None and result.suspects == () and result.basis == "none"
    assert result.summary.startswith(f"no straggler: ranks 0{EN_DASH}3 wait on their peers")


def test_a_rank_caught_computing_by_chance_is_not_named_without_a_cpu_gap() -> None:
    """Three samples of a balanced job: rank 1 happened to compute in each, rank 0 to wait."""
    procs = [_rank(0, [ALLREDUCE, COMPUTE, ALLREDUCE], 55.0, 2)]
    procs.append(_rank(1, [COMPUTE] * 3, 60.0, 2))
    result = straggler_analysis(b := build(procs, n=3), extract(b))
    assert result is not None and result.suspects == ()


def test_one_rank_or_one_sample_has_no_analysis() -> None:
    assert _analysis(build([_rank(0, [COMPUTE], 90.0, 1)], n=3)) is None
    two = [_rank(0, [ALLREDUCE], 5.0, 2), _rank(1, [COMPUTE], 95.0, 2)]
    assert _analysis(build(two, n=1)) is None


def test_straggler_node_named_in_a_merged_bundle() -> None:
    import msgspec

    procs = [_rank(r, [ALLREDUCE, ALLREDUCE, COMPUTE], 20.0, 16) for r in range(16) if r != 9]
    procs.append(_rank(9, [COMPUTE] * 3, 97.0, 16))
    bundle = build(procs, n=3)
    samples = tuple(
        msgspec.structs.replace(
            s,
            processes=tuple(
                msgspec.structs.replace(ps, host=f"node-{(ps.pid - 100) // 8:02d}")
                for ps in s.processes
            ),
        )
        for s in bundle.samples
    )
    infos = tuple(
        msgspec.structs.replace(p, host=f"node-{(p.pid - 100) // 8:02d}") for p in bundle.processes
    )
    merged = msgspec.structs.replace(bundle, samples=samples, processes=infos)
    result = straggler_analysis(merged, extract(merged))
    assert result is not None and result.suspects == (9,)
    assert result.suspect_hosts == ("node-01",)
    assert "rank 9 on node-01 computes" in result.summary


def test_rows_are_bounded() -> None:
    n = MAX_RANK_LOADS + 20
    procs = [_rank(r, [ALLREDUCE, COMPUTE, ALLREDUCE], 30.0, n) for r in range(n)]
    result = _analysis(build(procs, n=3))
    assert result is not None
    assert len(result.ranks) == MAX_RANK_LOADS and result.ranks_more == 20  # type: ignore[attr-defined]


def test_flight_recorder_lag_names_the_late_rank() -> None:
    """GPU ranks all sit in a synchronize: only the Flight Recorder shows who enqueues late."""
    procs = [_rank(r, [ALLREDUCE], 90.0, 3) for r in range(3)]
    bundle = build(procs, n=3)
    late = {0: 0.0, 1: 0.003, 2: 0.180}
    records = tuple(
        RankCollectives(
            rank=r,
            pg="0",
            pg_ranks=(0, 1, 2),
            recent=tuple(
                CollectiveRecord(
                    seq=s,
                    op="nccl:all_reduce",
                    state="completed",
                    created_s=1000.0 + s + late[r],
                    duration_ms=4.0 if r == 2 else 180.0,
                )
                for s in range(1, 6)
            ),
        )
        for r in range(3)
    )
    import msgspec

    bundle = msgspec.structs.replace(bundle, collectives=records)
    result = straggler_analysis(bundle, extract(bundle))
    assert result is not None and result.suspects == (2,)
    assert result.basis == "flight-recorder"
    assert "enqueues its collectives 180 ms after the first rank" in result.summary
    assert "its own 4 ms" in result.summary


def test_contended_host_the_cpu_ratio_names_it_when_the_job_runs_a_collective_backend() -> None:
    """Waiting ranks caught runnable in their compute frame every time (a shared host), yet
    at a quarter of the straggler's CPU: with gloo's threads in the ranks, it is named."""
    from series import Thr

    def procs(backend: bool) -> List[Proc]:
        out = []
        for r in range(4):
            p = _rank(r, [COMPUTE] * 3, 20.0 if r == 2 else 5.0, 4)
            if backend:
                p.threads = [Thr(tid_offset=1, name="pt_gloo_runloop")]
            out.append(p)
        return out

    named = straggler_analysis(b := build(procs(True), n=3), extract(b))
    assert named is not None and named.suspects == (2,)
    assert "at 4.0x the others' CPU" in named.summary
    unsynced = straggler_analysis(b := build(procs(False), n=3), extract(b))
    assert unsynced is not None and unsynced.suspects == ()


def test_flight_recorder_duration_is_read_from_a_dump_entry() -> None:
    from diag.probes.nccl.fr_dump import summarize_dump

    entry = {
        "collective_seq_id": 3,
        "profiling_name": "nccl:all_reduce",
        "state": "completed",
        "process_group": ["0", "default"],
        "time_created_ns": 1_000_000_000,
    }
    dump = {"entries": [dict(entry, duration_ms=12.5), dict(entry, collective_seq_id=4)]}
    (rec,) = summarize_dump(dump, rank=0)
    assert [c.duration_ms for c in rec.recent] == [12.5, None]
    bad = {"entries": [dict(entry, duration_ms="soon"), dict(entry, duration_ms=-1.0)]}
    (rec,) = summarize_dump(bad, rank=0)
    assert [c.duration_ms for c in rec.recent] == [None, None]


LOADER = (
    ("get", "/usr/lib/python3.11/queue.py"),
    ("fetch_batch", "/job/data.py"),
    ("main", "/job/train.py"),
)


def test_a_rank_waiting_on_its_own_input_while_the_others_wait_for_it_is_named() -> None:
    """The most common straggler burns no CPU: one rank waits on its data loader in every
    sample while the others wait in the all-reduce it has not joined yet."""
    procs = [_rank(r, [ALLREDUCE] * 3, 2.0, 4) for r in (0, 1, 3)]
    procs.append(_rank(2, [LOADER] * 3, 1.0, 4))
    result = straggler_analysis(b := build(procs, n=3), extract(b))
    assert result is not None
    assert result.suspects == (2,) and result.basis == "own-wait"
    assert result.summary.startswith("straggler: rank 2 waits on its own work in `fetch_batch`")
    assert result.ranks[0].rank == 2 and result.ranks[0].own_wait_samples == 3


def test_ranks_that_each_wait_on_their_input_by_turns_name_no_straggler() -> None:
    phases = [LOADER, ALLREDUCE, ALLREDUCE]
    procs = [_rank(r, phases[r % 3 :] + phases[: r % 3], 5.0, 3) for r in range(3)]
    result = straggler_analysis(b := build(procs, n=3), extract(b))
    assert result is not None and result.suspects == () and result.basis == "none"


def test_a_rank_on_its_input_is_no_straggler_when_nobody_waits_for_it() -> None:
    procs = [_rank(r, [COMPUTE] * 3, 60.0, 4) for r in (0, 1, 3)]
    procs.append(_rank(2, [LOADER] * 3, 1.0, 4))
    result = straggler_analysis(b := build(procs, n=3), extract(b))
    assert result is not None and result.suspects == ()
