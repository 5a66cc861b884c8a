"""Flight Recorder: real dumps written by torch (gloo, CPU), one rank lagging, diag naming it.

``fr_lag_job.py`` runs 3 gloo ranks with Flight Recorder on; rank 2 never enters all_reduce #5
while ranks 0 and 1 wait in it. Rank 0 and 2 dump JSON (``_dump_fr_trace_json``), rank 1 a
pickle (``_dump_fr_trace``), at TORCH_FR_DUMP_TEMP_FILE + rank, as torch does on a timeout.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any, Callable, Dict

import pytest
from conftest import PROGRAMS, run_diag, start_ready

from diag.bundle.io import load_bundle
from diag.model import CollectiveRecord, ProcessInfo, RankCollectives
from diag.probes.nccl import flight_recorder
from diag.probes.nccl.flight_recorder import DumpError, decode_dump, summarize_dump
from diag.verdict.collectives import fr_findings

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def fr_job(tmp_path_factory: pytest.TempPathFactory) -> Any:
    directory = tmp_path_factory.mktemp("fr")
    job = start_ready(
        [sys.executable, str(PROGRAMS / "fr_lag_job.py"), str(directory), "3"], timeout_s=150
    )
    ranks = {int(k): v for k, v in json.loads(job.lines[-1].split("READY", 1)[1]).items()}
    yield job, directory, ranks
    job.stop()


def _processes(ranks: Dict[int, int], directory: Path) -> list[ProcessInfo]:
    env = {"TORCH_FR_DUMP_TEMP_FILE": str(directory / "fr_rank_")}
    return [ProcessInfo(pid=pid, rank=rank, env=env) for rank, pid in ranks.items()]


@pytest.mark.torch
@pytest.mark.slow
def test_real_dumps_both_forms_are_read(fr_job: Any) -> None:
    _job, directory, ranks = fr_job
    raw0 = (directory / "fr_rank_0").read_bytes()
    raw1 = (directory / "fr_rank_1").read_bytes()
    assert raw0.lstrip().startswith(b"{") and raw1.startswith(b"\x80")  # JSON and pickle
    records, problems = flight_recorder.collect(_processes(ranks, directory))
    assert problems == ()
    by_rank = {r.rank: r for r in records if r.recent}
    assert set(by_rank) == {0, 1, 2}
    assert by_rank[0].pid == ranks[0]
    assert by_rank[0].pg_ranks == (0, 1, 2)
    last0 = by_rank[0].recent[-1]
    assert (last0.seq, last0.op) == (5, "gloo:all_reduce")
    assert by_rank[1].recent[-1].seq == 5  # the pickle says the same as the JSON
    assert by_rank[2].recent[-1].seq == 4 and by_rank[2].recent[-1].op == "gloo:barrier"
    assert by_rank[2].last_enqueued_seq == 4


@pytest.mark.torch
@pytest.mark.slow
def test_lagging_rank_is_named(fr_job: Any) -> None:
    _job, directory, ranks = fr_job
    records, _ = flight_recorder.collect(_processes(ranks, directory))
    findings = fr_findings(records)
    lag = [f for f in findings if f.evidence.signal == "fr-lag"]
    assert len(lag) == 1
    assert lag[0].evidence.ranks == (2,)
    assert "rank 2 never entered all_reduce #5" in lag[0].evidence.detail
    assert [(s.rank, s.pid) for s in lag[0].suspects] == [(2, ranks[2])]


@pytest.mark.torch
@pytest.mark.slow
def test_capture_names_the_laggard(fr_job: Any, tmp_path: Path) -> None:
    job, _directory, ranks = fr_job
    out = tmp_path / "fr.json"
    result = run_diag(
        ["capture", "--pid", str(job.pid), "--count", "2", "--interval", "1", "-o", str(out)]
    )
    assert result.returncode == 0, result.stderr
    bundle = load_bundle(out)
    assert {r.rank for r in bundle.collectives} == {0, 1, 2}
    assert bundle.verdict is not None
    details = [e.detail for e in bundle.verdict.evidence if e.signal == "fr-lag"]
    assert any("rank 2 never entered all_reduce #5" in d for d in details), details
    assert any(s.rank == 2 and s.pid == ranks[2] for s in bundle.verdict.suspects)
    assert (bundle.verdict.rule, bundle.verdict.state) == ("collective_laggard", "deadlocked"), (
        bundle.verdict.summary
    )


def _copy_dumps(directory: Path, dest: Path, prefix: str) -> Path:
    """The job's three dumps copied to ``dest`` as ``<prefix><rank>``, as a user collects them."""
    dest.mkdir()
    for rank in range(3):
        (dest / f"{prefix}{rank}").write_bytes((directory / f"fr_rank_{rank}").read_bytes())
    return dest


@pytest.mark.torch
@pytest.mark.slow
def test_fr_dir_option_reads_a_copied_dump_dir(fr_job: Any, tmp_path: Path) -> None:
    _job, directory, _ranks = fr_job
    copy = _copy_dumps(directory, tmp_path / "dumps", "nccl_trace_rank_")
    records, problems = flight_recorder.collect([], fr_dirs=[str(copy)])
    assert problems == ()
    assert {r.rank for r in records} == {0, 1, 2}
    assert {r.pid for r in records} == {None}


def test_pickle_with_a_class_is_refused() -> None:
    evil = pickle.dumps({"entries": [os.getcwd], "version": "2.10"})
    with pytest.raises(DumpError):
        decode_dump(evil)
    with pytest.raises(DumpError):
        decode_dump(b"not a dump at all")
    with pytest.raises(DumpError):
        decode_dump(b'{"version": "2.10"}')


def test_stale_dump_from_an_earlier_job_is_skipped(tmp_path: Path) -> None:
    dump = {"entries": [], "version": "2.10", "pg_status": {"0": {"last_enqueued_collective": 9}}}
    path = tmp_path / "fr_rank_0"
    path.write_text(json.dumps(dump))
    os.utime(path, (1000.0, 1000.0))
    env = {"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_rank_")}
    fresh = ProcessInfo(pid=1, rank=0, env=env, start_time_s=500.0)
    stale = ProcessInfo(pid=1, rank=0, env=env, start_time_s=2000.0)
    assert len(flight_recorder.collect([fresh])[0]) == 1
    assert flight_recorder.collect([stale])[0] == ()


def _nccl_entry(seq: int, state: str, op: str = "nccl:all_reduce") -> Dict[str, Any]:
    return {
        "record_id": seq,
        "collective_seq_id": seq,
        "profiling_name": op,
        "state": state,
        "process_group": ["0", "default_pg"],
        "pg_id": 0,
        "is_p2p": False,
        "time_created_ns": 1_700_000_000_000_000_000 + seq,
    }


def _dump(states: Callable[[int], str], enq: int = 4) -> Dict[str, Any]:
    return {
        "version": "2.10",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
        "pg_status": {
            "0": {
                "last_enqueued_collective": enq,
                "last_started_collective": 3,
                "last_completed_collective": 3,
            }
        },
        "entries": [_nccl_entry(s, states(s)) for s in range(1, enq + 1)],
    }


def test_rank_whose_collective_never_started_is_named() -> None:
    records = []
    for rank in range(4):
        stuck_rank = rank == 1

        def state(seq: int, stuck_rank: bool = stuck_rank) -> str:
            if seq < 4:
                return "completed"
            return "scheduled" if stuck_rank else "started"

        records.extend(summarize_dump(_dump(state), rank, pid=100 + rank))
    findings = fr_findings(records)
    assert [f.evidence.signal for f in findings] == ["fr-not-started"]
    assert findings[0].suspects[0].rank == 1 and findings[0].suspects[0].pid == 101
    assert "all_reduce #4" in findings[0].evidence.detail


def test_all_ranks_inside_one_collective_and_a_missing_dump() -> None:
    records = [
        RankCollectives(
            rank=r,
            pg="0",
            pg_ranks=(0, 1, 2),
            last_enqueued_seq=7,
            last_completed_seq=6,
            recent=(CollectiveRecord(seq=7, op="nccl:all_gather", state="scheduled"),),
        )
        for r in (0, 1)
    ]
    signals = {f.evidence.signal: f for f in fr_findings(records)}
    assert set(signals) == {"fr-missing", "fr-all-waiting"}
    assert signals["fr-missing"].evidence.ranks == (2,)
    assert "all_gather #7" in signals["fr-all-waiting"].evidence.detail
    assert not signals["fr-all-waiting"].suspects


@pytest.mark.torch
@pytest.mark.slow
def test_watch_with_fr_dir_names_the_laggard(fr_job: Any, tmp_path: Path) -> None:
    job, directory, ranks = fr_job
    copy = _copy_dumps(directory, tmp_path / "collected", "trace_")
    out = tmp_path / "watch.html"
    args = ["watch", "--pid", str(job.pid), "--count", "2", "--interval", "1", "-o", str(out)]
    result = run_diag([*args, "--fr-dir", str(copy)])
    assert result.returncode == 0, result.stderr
    bundle = load_bundle(tmp_path / "watch.json")
    assert {(r.rank, Path(r.source).parent) for r in bundle.collectives} == {
        (r, copy) for r in range(3)
    }
    assert bundle.verdict is not None
    assert any(s.rank == 2 and s.pid == ranks[2] for s in bundle.verdict.suspects)
    assert "rank 2 never entered all_reduce #5" in out.read_text()
    journal = load_bundle(tmp_path / "watch.jsonl")  # the journal's end line keeps them too
    assert {r.rank for r in journal.collectives} == {0, 1, 2}


def test_a_group_spans_hosts() -> None:
    """Ranks 0-1 on node-a, 2-3 on node-b: rank 3 behind is found across the two dumps sets."""
    op = CollectiveRecord(seq=9, op="nccl:reduce_scatter", state="started")
    records = [
        RankCollectives(
            rank=r,
            pg="0",
            host="node-a" if r < 2 else "node-b",
            pid=100 + r,
            last_enqueued_seq=8 if r == 3 else 9,
            recent=() if r == 3 else (op,),
        )
        for r in range(4)
    ]
    (finding,) = fr_findings(records)
    assert "rank 3 never entered reduce_scatter #9" in finding.evidence.detail
    assert [(s.host, s.pid) for s in finding.suspects] == [("node-b", 103)]


def _at(rank: int, op: str, sizes: str = "[[4]]", state: str = "scheduled") -> RankCollectives:
    entry = CollectiveRecord(seq=5, op=op, state=state, sizes=sizes)
    return RankCollectives(rank=rank, pg="0", pid=10 + rank, last_enqueued_seq=5, recent=(entry,))


def test_mismatched_collective_names_the_odd_rank() -> None:
    records = [_at(0, "nccl:all_reduce"), _at(1, "nccl:all_reduce"), _at(2, "nccl:barrier", "")]
    (finding,) = fr_findings(records)
    assert finding.evidence.signal == "fr-mismatch"
    assert "rank 2 entered barrier #5" in finding.evidence.detail
    assert [s.pid for s in finding.suspects] == [12]


def test_mismatched_sizes_are_a_mismatch_too() -> None:
    records = [_at(r, "nccl:all_reduce", "[[4]]") for r in range(3)]
    records.append(_at(3, "nccl:all_reduce", "[[8]]"))
    (finding,) = fr_findings(records)
    assert finding.evidence.ranks == (3,) and "all_reduce [[8]] #5" in finding.evidence.detail


def test_completed_elsewhere_is_not_a_blocked_stream() -> None:
    """Without NCCL timing, entries go scheduled -> completed; a late mark is not a fault."""
    records = [_at(0, "nccl:all_reduce", state="completed"), _at(1, "nccl:all_reduce")]
    assert [f.evidence.signal for f in fr_findings(records)] == []
