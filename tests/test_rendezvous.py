"""torchrun's agent waiting in its rendezvous (diag.verdict.rendezvous): its settings read
from a real torchrun command line, and agents on several hosts that can never meet. The
single-host case on a real torchrun: tests/test_wait_edges_real.py."""

from __future__ import annotations

from typing import Tuple

from diag.model import ProcessInfo
from diag.verdict.features import ProcSignals
from diag.verdict.rendezvous import mismatch, settings_of, waiting_agents
from diag.verdict.thread_wait import ThreadWait

RENDEZVOUS = ThreadWait("rendezvous", "SimpleElasticAgent._rendezvous", "<module>")


def _agent(host: str, pid: int, *argv: str) -> ProcSignals:
    cmdline: Tuple[str, ...] = ("/venv/bin/python3", "/venv/bin/torchrun", *argv)
    info = ProcessInfo(pid=pid, host=host, cmdline=cmdline, name="pt_elastic")
    return ProcSignals(key=(host, pid), info=info, main_wait=RENDEZVOUS)


def test_settings_from_both_spellings_and_the_script_ends_them() -> None:
    p = _agent("n1", 10, "--nnodes", "2:4", "--nproc-per-node", "8", "--rdzv_backend=c10d",
               "--rdzv-endpoint", "head:29400", "--rdzv-id=job7", "t.py", "--nnodes=9")  # fmt: skip
    s = settings_of(p)
    assert (s.nodes, s.endpoint, s.run_id, s.backend) == ("2:4", "head:29400", "job7", "c10d")
    static = settings_of(_agent("n1", 11, "--standalone", "--nnodes=2", "--master-addr", "h0",
                                "train.py"))  # fmt: skip
    assert (static.nodes, static.endpoint) == ("2", "h0:29500")


def test_agents_with_different_ids_never_meet() -> None:
    a = _agent("n1", 10, "--nnodes=2", "--rdzv-endpoint=head:29400", "--rdzv-id=a", "t.py")
    b = _agent("n2", 10, "--nnodes=2", "--rdzv-endpoint=head:29400", "--rdzv-id=b", "t.py")
    agents = waiting_agents([a, b])
    assert [p.key for p, _ in agents] == [("n1", 10), ("n2", 10)]
    assert mismatch(agents) == "--rdzv-id: a on n1; b on n2"
    same = waiting_agents([a, _agent("n2", 10, *a.info.cmdline[2:])])
    assert mismatch(same) is None


def test_an_agent_whose_ranks_run_is_not_waiting_for_nodes() -> None:
    agent = _agent("n1", 10, "--nnodes=2", "t.py")
    rank = ProcSignals(key=("n1", 11), info=ProcessInfo(pid=11, ppid=10, role="rank", rank=0))
    assert waiting_agents([agent, rank]) == []
