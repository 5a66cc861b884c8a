"""NCCL / torch watchdog / CUDA / Xid log lines: parsed from recorded text, summarised per rank.

The lines below are in the formats NCCL's debug.cc and torch's ProcessGroupNCCL.cpp print
(prefixes, field order, punctuation), including the uninitialised "last completed" number that
torch 2.3 printed in a real report.
"""

from __future__ import annotations

import time
from pathlib import Path

from diag.model import LogSample, ProcessInfo, Sample
from diag.probes.nccl import logs as nccl_logs
from diag.probes.nccl.logs import LogEntry, parse_line, summarize

WATCHDOG_OLD = (
    "[rank2]:[E ProcessGroupNCCL.cpp:563] [Rank 2] Watchdog caught collective operation timeout:"
    " WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=120000)"
    " ran for 120092 milliseconds before timing out."
)
WATCHDOG_NEW = (
    "[rank1]:[E1130 07:41:02.118223541 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) "
    "Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLGATHER, "
    "NumelIn=4096, NumelOut=32768, Timeout(ms)=600000) ran for 600045 milliseconds before timing "
    "out."
)
TIMEOUT_AT_GARBAGE = (
    "[rank2]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 2] Timeout at NCCL work: 1, last enqueued "
    "NCCL work: 1, last completed NCCL work: 76280750235782912."
)
DUMP_SIGNAL = (
    "[rank0]:[E1130 07:41:03.000000 123 ProcessGroupNCCL.cpp:1682] [PG ID 0 PG GUID 0(default_pg)"
    " Rank 0] Received a dump signal due to a collective timeout from this local rank and we will"
    " try our best to dump the debug info. Last enqueued NCCL work: 11, last completed NCCL work:"
    " 10.This is most likely caused by incorrect usages of collectives"
)
NCCL_INFO = (
    "x3200c0s19b1n0:191643:191866 [2] NCCL INFO comm 0x5590ec4762b0 rank 2 nranks 8 cudaDev 2 "
    "nvmlDev 2 busId 85000 commId 0xfa38415269cf0cf7 - Init COMPLETE"
)
NCCL_WARN = (
    "[2026-11-30 07:40:59] gpu-node-3:4242:4300 [1] misc/socket.cc:484 (socketStartConnect) NCCL "
    "WARN socketStartConnect: Connect to 10.1.2.3<43211> failed : Software caused connection abort"
)
NCCL_WARN_CUDA = (
    "gpu-node-3:4243:4301 [3] enqueue.cc:1556 NCCL WARN Cuda failure 700 'an illegal memory "
    "access was encountered'"
)
CUDA_ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered"
NCCL_ERROR = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), "
    "NCCL version 2.21.5"
)
XID = (
    "[Mon Nov 30 07:39:12 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=4243, name=python, GPU has "
    "fallen off the bus."
)
HEARTBEAT = (
    "[rank3]:[E1130 07:50:00.000 99 ProcessGroupNCCL.cpp:1423] [PG ID 0 PG GUID 0 Rank 3] "
    "Heartbeat monitor timed out! Process will be terminated after dumping debug info."
)


def test_watchdog_timeout_line_gives_rank_seq_and_op() -> None:
    hit = parse_line(WATCHDOG_OLD)
    assert hit is not None
    assert (hit.kind, hit.rank, hit.seq, hit.op) == ("watchdog_timeout", 2, 4, "ALLREDUCE")


def test_new_pg_prefix_and_glog_time() -> None:
    hit = parse_line(WATCHDOG_NEW, year=2026)
    assert hit is not None
    assert (hit.rank, hit.seq, hit.op) == (1, 7, "ALLGATHER")
    assert hit.t_s == time.mktime((2026, 11, 30, 7, 41, 2, 0, 0, -1)) + 0.118223541


def test_uninitialised_completed_counter_is_dropped() -> None:
    hit = parse_line(TIMEOUT_AT_GARBAGE)
    assert hit is not None
    assert hit.kind == "watchdog_timeout" and hit.rank == 2 and hit.seq == 1
    assert hit.last_enqueued == 1
    assert hit.last_completed is None


def test_dump_signal_line_carries_enqueued_and_completed() -> None:
    hit = parse_line(DUMP_SIGNAL)
    assert hit is not None
    assert (hit.rank, hit.last_enqueued, hit.last_completed) == (0, 11, 10)


def test_nccl_prefix_gives_pid_and_kind() -> None:
    info = parse_line(NCCL_INFO)
    warn = parse_line(NCCL_WARN, year=2026)
    assert info is not None and warn is not None
    assert (info.kind, info.pid) == ("nccl_info", 191643)
    assert (warn.kind, warn.pid) == ("nccl_warn", 4242)
    assert warn.t_s == time.mktime((2026, 11, 30, 7, 40, 59, 0, 0, -1))


def test_most_specific_kind_wins() -> None:
    cuda_warn = parse_line(NCCL_WARN_CUDA)
    assert cuda_warn is not None and cuda_warn.kind == "cuda_error" and cuda_warn.pid == 4243
    for line, kind in (
        (CUDA_ERROR, "cuda_error"),
        (NCCL_ERROR, "nccl_error"),
        (XID, "xid"),
        (HEARTBEAT, "watchdog_hang"),
    ):
        hit = parse_line(line)
        assert hit is not None and hit.kind == kind, line
    xid = parse_line(XID)
    assert xid is not None and xid.pid == 4243


def test_ordinary_lines_are_ignored() -> None:
    for line in ("step 100 loss 2.31", "INFO: Started server process [123]", ""):
        assert parse_line(line) is None


def _ranks() -> list[ProcessInfo]:
    return [
        ProcessInfo(pid=4242, rank=0, local_rank=0, role="rank"),
        ProcessInfo(pid=4243, rank=1, local_rank=1, role="rank"),
    ]


def test_summary_groups_by_rank_via_pid_and_counts() -> None:
    entries = [
        LogEntry("/tmp/job.log", NCCL_WARN, 100.0),
        LogEntry("/tmp/job.log", NCCL_WARN, 101.0),
        LogEntry("/tmp/job.log", NCCL_WARN_CUDA, 102.0),
        LogEntry("/tmp/job.log", "[rank1]:" + CUDA_ERROR, 103.0),
        LogEntry("/tmp/job.log", "step 5 loss 1.0", 103.0),
    ]
    summary = {s.rank: s for s in summarize(entries, _ranks())}
    assert set(summary) == {0, 1}
    warn = {s.kind: s for s in summary[0].signals}["nccl_warn"]
    assert warn.count == 2 and warn.path == "/tmp/job.log"
    assert summary[0].pid == 4242
    cuda = {s.kind: s for s in summary[1].signals}["cuda_error"]
    assert cuda.count == 2
    assert cuda.last_line.endswith("illegal memory access was encountered")
    assert cuda.last_t_s == 103.0


def test_summary_keeps_watchdog_sequence_numbers() -> None:
    summary = summarize([LogEntry("a", WATCHDOG_OLD), LogEntry("a", DUMP_SIGNAL)], _ranks())
    by_rank = {s.rank: s for s in summary}
    assert (by_rank[2].timeout_seq, by_rank[2].timeout_op) == (4, "ALLREDUCE")
    assert (by_rank[0].last_enqueued_seq, by_rank[0].last_completed_seq) == (11, 10)


def test_single_writer_log_is_attributed_to_its_process() -> None:
    summary = summarize([LogEntry("r1.log", CUDA_ERROR, 5.0, pids=(4243,))], _ranks())
    assert [(s.rank, s.pid) for s in summary] == [(1, 4243)]


def test_tail_deltas_count_each_line_once() -> None:
    def log(lines: int, tail: tuple[str, ...]) -> LogSample:
        return LogSample(path="/gone/job.log", lines=lines, inode=7, tail=tail)

    samples = [
        Sample(index=0, t_s=10.0, logs=(log(2, ("a", NCCL_WARN)),)),
        Sample(index=1, t_s=20.0, logs=(log(3, ("a", NCCL_WARN, NCCL_WARN_CUDA)),)),
        Sample(index=2, t_s=30.0, logs=(log(3, ("a", NCCL_WARN, NCCL_WARN_CUDA)),)),
    ]
    entries = nccl_logs.entries_from_samples(samples)
    assert [(e.line, e.seen_t_s) for e in entries] == [
        ("a", 10.0),
        (NCCL_WARN, 10.0),
        (NCCL_WARN_CUDA, 20.0),
    ]
    # The file is gone: collect() falls back to the tails.
    result = nccl_logs.collect(samples, _ranks(), scrub=lambda s: s)
    kinds = {(s.rank, sig.kind): sig.count for s in result for sig in s.signals}
    assert kinds == {(0, "nccl_warn"): 1, (1, "cuda_error"): 1}


def test_collect_reads_whole_file_and_scrubs(tmp_path: Path) -> None:
    path = tmp_path / "rank1.log"
    noise = "\n".join(f"step {i} loss 1.0" for i in range(500))
    path.write_text(f"{NCCL_INFO}\n{noise}\n{CUDA_ERROR} token=hunter2\n")
    samples = [
        Sample(index=0, t_s=50.0, logs=(LogSample(path=str(path), pids=(4243,), lines=502),))
    ]
    result = nccl_logs.collect(samples, _ranks(), scrub=lambda s: s.replace("hunter2", "***"))
    lines = [sig.last_line for s in result for sig in s.signals]
    assert any("illegal memory access" in line for line in lines)
    assert not any("hunter2" in line for line in lines)
    by_rank = {s.rank: s for s in result}
    assert {sig.kind for sig in by_rank[1].signals} == {"cuda_error"}
