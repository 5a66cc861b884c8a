"""Verdicts a tester found wrong on real programs (explore round 3), and their contrasts.

- A rank started alone, waiting in ``init_process_group`` for a TCPStore nobody hosts, read
  'deadlocked: ... a mismatched collective; kill the job'. It waits to join the rendezvous:
  idle, naming MASTER_ADDR:MASTER_PORT and what to check (``rendezvous.store_joins``).
- A training loop waiting for batches while its DataLoader workers sleep inside the dataset's
  ``__getitem__`` (a slow remote fetch) read 'idle: ... it wakes on a timer'. It is
  data-starved: slow, naming the workers and the dataset frame (``work.data_starved``).
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


DATA = "/venv/lib/python3.11/site-packages/torch/utils/data"
LOADER_GET: Tuple[Tuple[str, str], ...] = (
    ("Queue.get", "/usr/lib/python3.11/multiprocessing/queues.py"),
    ("_MultiProcessingDataLoaderIter._try_get_data", f"{DATA}/dataloader.py"),
    ("_MultiProcessingDataLoaderIter._get_data", f"{DATA}/dataloader.py"),
    ("_BaseDataLoaderIter.__next__", f"{DATA}/dataloader.py"),
    ("<module>", "/job/train.py"),
)
WORKER_LOOP: Tuple[Tuple[str, str], ...] = (
    ("_worker_loop", f"{DATA}/_utils/worker.py"),
    ("BaseProcess._bootstrap", "/usr/lib/python3.11/multiprocessing/process.py"),
)
IN_DATASET: Tuple[Tuple[str, str], ...] = (
    ("RemoteShards.__getitem__", "/job/train.py"),
    ("_MapDatasetFetcher.fetch", f"{DATA}/_utils/fetch.py"),
    *WORKER_LOOP,
)
IDLE_WORKER = (("Queue.get", "/usr/lib/python3.11/multiprocessing/queues.py"), *WORKER_LOOP)
SLEEPING = {"wchan": "hrtimer_nanosleep", "syscall": "clock_nanosleep", "wait_timed": True}


def _loop(stack: object = LOADER_GET) -> Proc:
    return Proc(pid=100, role="process", stack=stack, wait_timed=True)  # type: ignore[arg-type]


def _worker(pid: int, stack: object = IN_DATASET, **kw: object) -> Proc:
    return Proc(pid=pid, ppid=100, role="worker", stack=stack, **{**SLEEPING, **kw})  # type: ignore[arg-type]


def test_recorded_loop_starved_by_slow_dataset_workers_is_slow() -> None:
    v = classify(load_bundle(BUNDLES / "explore_dataloader_slow.json"))
    assert (v.state, v.rule) == ("slow", "children_work"), v.summary
    assert "`RemoteShards.__getitem__`" in v.summary and "data-starved" in v.summary
    assert "don't kill it" in v.summary and "num_workers" in v.summary
    assert {s.pid for s in v.suspects} == {13842, 13844}


def test_workers_asleep_in_the_dataset_starve_the_loop() -> None:
    v = _judge([_loop(), _worker(101), _worker(102)])
    assert (v.state, v.rule) == ("slow", "children_work"), v.summary
    assert "2 DataLoader workers (pids 101,102) are inside the dataset's" in v.summary
    assert "asleep there" in v.summary


def test_one_worker_fetching_beside_one_idle_in_its_loop_still_starves() -> None:
    """Batches come in order: the others may have their prefetch done and wait for indices."""
    v = _judge(
        [
            _loop(),
            _worker(101),
            _worker(102, stack=IDLE_WORKER, **{"wchan": "futex_wait_queue", "syscall": "futex"}),
        ]
    )
    assert (v.state, v.rule) == ("slow", "children_work"), v.summary
    assert "pid 101" in v.summary and "pid 102" not in v.summary


def test_workers_idle_in_their_own_loop_are_not_slow() -> None:
    """Workers wait in ``_worker_loop`` for indices: nobody asks them for data - no fetch."""
    idle = {"wchan": "futex_wait_queue", "syscall": "futex", "wait_timed": True}
    v = _judge(
        [_loop(), _worker(101, stack=IDLE_WORKER, **idle), _worker(102, stack=IDLE_WORKER, **idle)]
    )
    assert v.state != "slow", v.summary
    asleep = _loop(stack=(("sleep_a_bit", "/job/train.py"), ("<module>", "/job/train.py")))
    v = _judge([Proc(**{**asleep.__dict__, **SLEEPING}), _worker(101, stack=IDLE_WORKER, **idle)])
    assert v.state != "slow", v.summary


def test_a_worker_on_a_lock_in_the_dataset_is_no_slow_fetch() -> None:
    """A lock in a forked worker may be one its parent held at fork: never 'slow'."""
    locked = {"wchan": "futex_wait_queue", "syscall": "futex", "futex_op": 0x189}
    lock_stack = (("Lock.acquire", "/usr/lib/python3.11/threading.py"), *IN_DATASET)
    v = _judge([_loop(), _worker(101, stack=lock_stack, **locked), _worker(102)])
    assert v.rule != "children_work", v.summary


def test_a_rank_in_a_collective_beside_fetching_workers_stays_deadlocked() -> None:
    allreduce = (("all_reduce", TORCH), ("step", "/job/train.py"), ("<module>", "/job/train.py"))
    rank0 = Proc(pid=100, rank=0, world_size=2, ppid=99, stack=allreduce)
    rank1 = Proc(pid=200, rank=1, world_size=2, ppid=99, stack=allreduce)
    v = _judge([rank0, rank1, _worker(101), _worker(102)])
    assert v.state == "deadlocked", v.summary
