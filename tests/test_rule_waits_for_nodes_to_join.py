"""Rule ``waits_for_nodes_to_join``, for a rank in ``init_process_group``: a rank started
alone, connecting to a TCPStore nobody hosts, waits to join the rendezvous - idle, naming
MASTER_ADDR:MASTER_PORT and what to check (``rendezvous.store_joins``), never 'deadlocked: a
mismatched collective; kill the job' (a tester found it so on a real program). Beside it, the
store up (rank 0 listening), ranks past the store in gloo's init and a rank in a collective
stay peer waits.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

from series import TORCH, Proc, build

from diag.bundle.io import load_bundle
from diag.model import Bundle, Verdict
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
RDZV = "/venv/lib/python3.11/site-packages/torch/distributed/rendezvous.py"
STORE_CONNECT: Tuple[Tuple[str, str], ...] = (
    ("_create_c10d_store", RDZV),
    ("_env_rendezvous_handler", RDZV),
    ("init_process_group", TORCH),
    ("<module>", "/job/train.py"),
)
GLOO_INIT: Tuple[Tuple[str, str], ...] = (
    ("_new_process_group_helper", TORCH),
    ("init_process_group", TORCH),
    ("<module>", "/job/train.py"),
)
ENV = {"MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29651"}


def _connecting(pid: int, rank: int, **kw: object) -> Proc:
    """A rank retrying its connect to the store: asleep (clock_nanosleep) between tries."""
    return Proc(
        pid=pid, rank=rank, world_size=4, ppid=99, stack=STORE_CONNECT, wchan="hrtimer_nanosleep",
        syscall="clock_nanosleep", wait_timed=True, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def _judge(procs: List[Proc]) -> Verdict:
    return classify(build(procs))


def test_recorded_rank_alone_waits_to_join_not_deadlocked() -> None:
    v = classify(load_bundle(BUNDLES / "explore_rendezvous_missing.json"))
    assert (v.state, v.rule) == ("idle", "waits_for_nodes_to_join"), v.summary
    assert "kill the job" not in v.summary and "mismatched" not in v.summary.split("so")[0]
    assert "join the rendezvous" in v.summary and "MASTER_ADDR" in v.summary
    assert "killing it does not help" in v.summary


def test_ranks_connecting_to_a_store_nobody_listens_on_name_its_endpoint() -> None:
    v = _judge([_connecting(101, 1, env=ENV), _connecting(102, 2, env=ENV)])
    assert (v.state, v.rule) == ("idle", "waits_for_nodes_to_join"), v.summary
    assert "ranks 1\u20132 wait in" in v.summary
    assert "10.0.0.7:29651" in v.summary and "`ss -ltn | grep :29651` on 10.0.0.7" in v.summary
    assert "kill the job" not in v.summary and not v.suspects


def test_store_up_with_rank_0_listening_stays_a_peer_wait() -> None:
    """Rank 0 hosts the store (listens on MASTER_PORT): the store is up, one rank is missing -
    the peer rules judge it, as before."""
    rank0 = Proc(pid=100, rank=0, world_size=4, ppid=99, stack=STORE_CONNECT, env=ENV,
                 ports=(29651,))  # fmt: skip
    v = _judge([rank0, _connecting(101, 1, env=ENV), _connecting(102, 2, env=ENV)])
    assert v.rule != "waits_for_nodes_to_join", v.summary
    without_env = _judge([Proc(pid=100, rank=0, world_size=4, ppid=99, stack=STORE_CONNECT,
                               ports=(29651,)), _connecting(101, 1)])  # fmt: skip
    assert without_env.rule != "waits_for_nodes_to_join", without_env.summary


def test_ranks_past_the_store_in_gloo_init_are_not_joining() -> None:
    """Past the store (gloo's own connect in ``_new_process_group_helper``) the store is up:
    what remains is a peer wait, judged as before."""
    procs = [Proc(pid=100 + r, rank=r, world_size=3, ppid=99, stack=GLOO_INIT) for r in range(3)]
    v = _judge(procs)
    assert (v.state, v.rule) == ("deadlocked", "peers_wait"), v.summary


def test_a_rank_in_a_collective_beside_a_joiner_is_no_rendezvous() -> None:
    """A started rank waits in a collective: the job is past its rendezvous somewhere; the
    rank still joining is the peer rules' odd one out, not a rendezvous wait of the job."""
    allreduce = (("all_reduce", TORCH), ("step", "/job/train.py"), ("<module>", "/job/train.py"))
    v = _judge([Proc(pid=100, rank=0, world_size=2, ppid=99, stack=allreduce),
                _connecting(101, 1, env=ENV)])  # fmt: skip
    assert v.rule != "waits_for_nodes_to_join", v.summary


def test_mismatched_collective_stays_deadlocked() -> None:
    bundle: Bundle = load_bundle(BUNDLES / "gloo_mismatched_collective.json")
    v = classify(bundle)
    assert (v.state, v.rule) == ("deadlocked", "peers_wait"), v.summary
