"""NCCL/CUDA evidence end to end: real processes, real log files, the real sampler and verdict.

Rank 1 of ``cuda_error_job.py`` logs an illegal memory access and exits while rank 0 waits:
diag must read that line from rank 1's log, attribute it to rank 1 (the file's only writer /
the PID in NCCL's prefix), and name rank 1 - which then exited - as the explanation.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import PROGRAMS, run_diag

from diag.bundle.io import load_bundle
from diag.collect.collector import Collector
from diag.collect.enrich import enrich_bundle
from diag.model import Bundle, LogSignal, RankNcclLog, Sample
from diag.verdict.classify import classify
from diag.verdict.collectives import log_findings


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rpartition(")")[2].split()[0]


@pytest.mark.slow
def test_cuda_error_on_a_rank_that_then_exited(spawn: Any, tmp_path: Path) -> None:
    job = spawn([sys.executable, str(PROGRAMS / "cuda_error_job.py"), str(tmp_path)])
    ranks = {int(k): v for k, v in json.loads(job.lines[-1].split("READY", 1)[1]).items()}
    collector = Collector(job.pid, probe_timeout_s=10.0)
    samples = [collector.take_sample(0).sample]
    (tmp_path / "trigger").touch()
    deadline = time.monotonic() + 30
    while _state(ranks[1]) != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    samples.append(collector.take_sample(1).sample)
    bundle = Bundle(
        host=collector.host_info(),
        target=collector.target,
        processes=tuple(collector.processes.values()),
        stacks=dict(collector.stacks),
        samples=tuple(samples),
    )
    bundle = enrich_bundle(bundle, (), collector.redactor.scrub)
    by_rank = {lg.rank: lg for lg in bundle.nccl_logs}
    assert {s.kind for s in by_rank[1].signals} == {"nccl_info", "cuda_error"}
    assert by_rank[1].pid == ranks[1]
    assert {s.kind for s in by_rank[0].signals} == {"nccl_info"}

    verdict = classify(msgspec.structs.replace(bundle))
    cuda = [e for e in verdict.evidence if e.signal == "nccl-log-cuda-error"]
    assert len(cuda) == 1 and cuda[0].ranks == (1,)
    assert "then exited (exit code 1)" in cuda[0].detail
    assert "illegal memory access" in cuda[0].detail
    assert (verdict.rule, verdict.state) == ("rank_died", "deadlocked"), verdict.summary
    assert any(s.rank == 1 and s.pid == ranks[1] for s in verdict.suspects)


def _log(rank: int, pid: int, **kw: Any) -> RankNcclLog:
    return RankNcclLog(rank=rank, pid=pid, **kw)


def test_watchdog_lines_name_the_rank_behind() -> None:
    timeout = LogSignal(kind="watchdog_timeout", count=1, last_t_s=100.0)
    logs = [
        _log(
            0,
            10,
            signals=(timeout,),
            timeout_seq=12,
            timeout_op="ALLREDUCE",
            last_enqueued_seq=12,
            last_completed_seq=11,
        ),
        _log(
            1,
            11,
            signals=(timeout,),
            timeout_seq=12,
            timeout_op="ALLREDUCE",
            last_enqueued_seq=12,
            last_completed_seq=11,
        ),
        _log(2, 12, last_enqueued_seq=11, last_completed_seq=11),
    ]
    findings = log_findings(logs, [Sample(index=0, t_s=50.0)])
    signals = {f.evidence.signal: f for f in findings}
    assert signals["nccl-watchdog-timeout"].evidence.ranks == (0, 1)
    assert signals["nccl-watchdog-timeout"].lean == "stuck"
    assert "ALLREDUCE collective #12" in signals["nccl-watchdog-timeout"].evidence.detail
    lag = signals["nccl-watchdog-lag"]
    assert lag.evidence.ranks == (2,) and lag.suspects[0].pid == 12


def test_old_watchdog_line_does_not_lean() -> None:
    old = LogSignal(kind="watchdog_timeout", count=1, last_t_s=10.0)
    logs = [_log(0, 10, signals=(old,), timeout_seq=3, timeout_op="ALLREDUCE")]
    (finding,) = log_findings(logs, [Sample(index=0, t_s=500.0)])
    assert finding.lean is None  # a timeout from before the capture says nothing about now


def test_warning_alone_is_evidence_not_a_suspect() -> None:
    warn = LogSignal(kind="nccl_warn", count=3, last_line="NCCL WARN Connect to 10.0.0.2 failed")
    (finding,) = log_findings([_log(4, 40, signals=(warn,))])
    assert finding.evidence.signal == "nccl-log-warn" and not finding.suspects
    assert "3 NCCL WARN" in finding.evidence.detail


def test_line_nobody_can_be_named_for_says_where_it_is() -> None:
    err = LogSignal(kind="cuda_error", count=1, last_line="CUDA error: x", path="/j/train.log")
    (finding,) = log_findings([RankNcclLog(signals=(err,))])
    assert finding.evidence.detail.startswith("an unattributed line in train.log logged cuda")
    assert not finding.suspects and finding.evidence.ranks == ()


@pytest.mark.slow
def test_nccl_lines_never_carry_a_secret(spawn: Any, tmp_path: Path) -> None:
    secret = "hf_PlantedSecretValue12345"
    job = spawn(
        [sys.executable, str(PROGRAMS / "cuda_error_job.py"), str(tmp_path)],
        env={"HF_TOKEN": secret},
    )
    out = tmp_path / "out" / "cap.json"
    out.parent.mkdir()
    result = run_diag(["capture", "--pid", str(job.pid), "--count", "1", "-o", str(out)])
    assert result.returncode == 0, result.stderr
    bundle = load_bundle(out)
    infos = [s for lg in bundle.nccl_logs for s in lg.signals if s.kind == "nccl_info"]
    assert infos and any("NET/Plugin" in s.last_line or s.count >= 3 for s in infos)
    assert secret in (tmp_path / "rank0.log").read_text()  # it is there to be leaked
    written = list(out.parent.iterdir())
    assert len(written) >= 2
    for path in written:
        assert secret not in path.read_text(errors="replace"), path
