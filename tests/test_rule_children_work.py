"""Rule ``children_work``, for a training loop starved by its DataLoader workers
(``work.data_starved``): the loop waits for batches while its workers sleep inside the
dataset's ``__getitem__`` (a slow remote fetch) - slow, naming the workers and the dataset
frame, never 'idle: it wakes on a timer' (a tester found it so on a real program). Beside it,
workers idle in their own loop, a worker on a lock in the dataset and ranks in a collective
are not starved. Also here: compilers a waiting parent reaped are its work, not dead ranks.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

from series import TORCH, Proc, build

from diag.bundle.io import load_bundle
from diag.model import Verdict
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"


def _judge(procs: List[Proc]) -> Verdict:
    return classify(build(procs))


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


def test_compilers_their_parent_reaped_are_no_dead_ranks() -> None:
    """torch.compile's g++ and cc1plus come and go, each reaped (gone from /proc, code unread)
    while the parent waits on its compile futures: slow, never "they will never finish; kill
    the job" (CI once read this capture as rank_died)."""
    from series import Proc, build

    from diag.verdict.classify import classify

    result = (("result", "/usr/lib/python3.11/concurrent/futures/_base.py"),)
    parent = Proc(
        pid=100, role="launcher", stack=(*result, ("<module>", "/job/c.py")), children_pct=90.0
    )
    gone = ["alive", "exited", "exited"]
    gxx = Proc(pid=101, ppid=100, role="worker", cmdline=("g++", "x.cpp"), python=False,
               status=gone, cpu_pct=5.0)  # fmt: skip
    cc1 = Proc(pid=102, ppid=101, role="worker", cmdline=("cc1plus",), python=False,
               status=gone, cpu_pct=90.0)  # fmt: skip
    verdict = classify(build([parent, gxx, cc1], n=3))
    assert verdict.rule != "rank_died" and verdict.state == "slow", verdict.summary


def test_recorded_fetch_with_no_byte_for_two_minutes_hangs() -> None:
    """A worker's request to a store outside the job, read and never answered, 2 min 10 s old
    at the capture (tcp_info: nothing received since): no slow fetch but a hung one -
    deadlocked, the worker named with the store's address and the age."""
    v = classify(load_bundle(BUNDLES / "dataloader_fetch_hung.json"))
    assert (v.state, v.rule) == ("deadlocked", "children_work"), v.summary
    assert "without receiving one byte: the fetch hangs" in v.summary
    assert "has waited 2 min " in v.summary and "DataLoader(timeout=...)" in v.summary
    assert v.suspects and "has received nothing for 2 min" in v.suspects[0].reason


def test_the_same_fetch_a_minute_young_is_still_a_slow_one(tmp_path: Path) -> None:
    """The same recording with its request a minute old: a fetch that may still answer."""
    import json

    from recorded_variants import judge_variant

    data = json.loads((BUNDLES / "dataloader_fetch_hung.json").read_text())
    data.pop("verdict", None)
    for sample in data["samples"]:
        for ps in sample["processes"]:
            for end in ps.get("fd_ends") or []:
                if end.get("owed"):
                    end["last_sent_s"], end["last_recv_s"] = 60.0, 61.0
    v = judge_variant(data, tmp_path)
    assert (v.state, v.rule) == ("slow", "children_work"), v.summary
    assert "data-starved, not stuck" in v.summary


def test_recorded_workers_on_a_saturated_host_compute_though_their_share_is_small() -> None:
    """Two ranks wait on DataLoader workers that compute, captured on a host so loaded that
    the workers got 12 % and 8 % of a core in a 0.5 s interval (under the 10 % that reads as
    computing) and spent the rest runnable in the run queue: their demand for a CPU (CPU time
    plus run-queue delay) says they work. It read 'deadlocked: nothing moves and nothing can
    wake it' - a healthy job called hung because the host was busy."""
    v = classify(load_bundle(BUNDLES / "dataloader_workers_saturated.json"))
    assert (v.state, v.rule) == ("slow", "children_work"), v.summary
    assert {s.rank for s in v.suspects} == {0, 1}
