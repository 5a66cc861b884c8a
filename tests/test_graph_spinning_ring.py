"""A ring of ranks that all sit in one collective in every sample, each spinning a core in it
(gloo's busy wait), is read by the wait-for graph from what moved: with megabytes flowing
between them (the verdict's output, ``work.output_bytes``) it is a training loop sampled at
its ``all_reduce`` line every time - its chains end in work, never "a cycle - kill it"; with
nothing flowing it is a ring that can never end its waits.

Found in CI: a real 3-rank torchrun training job read progressing by the rules while its
graph read a deadlocked cycle, and the report would have warned "part of the job can never
wake ... kill it" on a healthy job.
"""

from __future__ import annotations

from diag.model import ProcessInfo
from diag.verdict.features import ProcSignals
from diag.verdict.graph_nodes import node_state
from diag.verdict.thread_wait import ThreadWait
from diag.verdict.waits import PEER


def _spinning_rank(pid: int, rank: int) -> ProcSignals:
    info = ProcessInfo(pid=pid, ppid=1, role="rank", rank=rank)
    sig = ProcSignals(key=("", pid), info=info)
    sig.main_wait = ThreadWait(kind="collective", label="all_reduce", caller="train")
    sig.spin_pct = 95.0
    sig.compute_pct = 5.0
    sig.intervals = 2
    return sig


def test_a_spinning_rank_whose_data_flows_is_working() -> None:
    sig = _spinning_rank(11, 0)
    assert sig.main_family == PEER
    assert node_state(sig, working=True) == "working"


def test_a_spinning_rank_with_nothing_flowing_still_spins() -> None:
    assert node_state(_spinning_rank(12, 1), working=False) == "spinning"


def test_a_spinning_rank_holding_unanswered_requests_is_not_working() -> None:
    sig = _spinning_rank(13, 2)
    sig.stale_requests = 2
    assert node_state(sig, working=True) == "spinning"
