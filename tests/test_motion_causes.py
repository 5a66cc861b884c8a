"""Motion read by its cause, on programs the suite had not seen (recorded in samples/bundles as
``explore_*``): a function the job named like a collective is not a collective, and a poll loop
whose poll call adds no Python frame (``time.sleep(0)``, ``os.sched_yield()``) is no work.

- ``cpu_in_wait_named_fn4``: one process, no torch, 97% of a core in its own pure-Python
  ``all_reduce()``, the hot loop on one line. Read as a collective, its CPU was "spins in a
  wait" and the verdict "deadlocked - kill the job" (peers_wait) with no peer anywhere.
- ``sleep0_scheduler`` / ``shm_yield_engine_idle``: a server's scheduler polling an empty
  deque with ``sleep(0)``, an engine spinning on a shared-memory slot with ``sched_yield``.
  Every sample shows one frame on one line, a core (or a share of one) burning: read as
  "slow: CPU-bound ... one long call". The kernel tells them apart (``polling.yield_loop``).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

from conftest import REPO
from recorded_variants import Json, explore_json, load_variant, threads_of
from series import THREADING, Proc, Thr, build

from diag.bundle.io import load_bundle
from diag.model import Frame, main_thread
from diag.verdict.classify import classify
from diag.verdict.features import extract
from diag.verdict.polling import poll_loops, yield_loop
from diag.verdict.stories import work_story
from diag.verdict.thread_wait import thread_wait
from diag.verdict.waits import frame_kind, stack_wait

BUNDLES = REPO / "samples" / "bundles"
SITE = "/venv/lib/python3.11/site-packages/"


_json = explore_json
_load = load_variant
_threads = threads_of


# --- 1. a function named like a collective -------------------------------------------------


def test_a_collective_name_in_the_jobs_own_file_is_no_wait() -> None:
    own = Frame(name="all_reduce", filename="/job/train.py", line=9)
    assert frame_kind(own) is None
    assert stack_wait((own, Frame(name="synchronize", filename="/job/train.py"))) is None
    # A project directory named "distributed" is still the job's own code.
    assert frame_kind(Frame(name="barrier", filename="/home/u/distributed/train.py")) is None


def test_a_collective_name_in_a_framework_or_library_is_a_collective() -> None:
    for path in (
        SITE + "vllm/distributed/device_communicators/cpu_communicator.py",
        SITE + "deepspeed/comm/comm.py",
        SITE + "torch/distributed/_functional_collectives.py",
    ):
        assert frame_kind(Frame(name="X.all_reduce", filename=path)) == "collective", path


def test_a_collective_name_counts_in_a_process_with_peers() -> None:
    own = Frame(name="barrier", filename="/job/ranks.py")
    assert frame_kind(own, peers=True) == "collective"


RANK_BARRIER = (("Barrier.wait", THREADING), ("barrier", "/job/ranks.py"), ("main", "/job/r.py"))
OWN_ALL_REDUCE = (("all_reduce", "/job/train.py"), ("main", "/job/train.py"))


def test_a_declared_ranks_own_barrier_wrapper_is_a_collective() -> None:
    """``diag demo``'s ranks: RANK/WORLD_SIZE in the environment, a ``barrier`` of their own
    around the group's wait - a rank has peers, so the name is its collective."""
    procs = [
        Proc(pid=100 + r, rank=r, world_size=2, rank_source="env:RANK", stack=RANK_BARRIER)
        for r in range(2)
    ]
    bundle = build(procs)
    main = main_thread(bundle.samples[-1].processes[0])
    assert main is not None
    assert thread_wait(bundle, main).kind == "collective"


def test_a_collective_backends_threads_give_a_process_peers() -> None:
    """No rank in the environment, but gloo's threads run: its ``all_reduce`` waits on peers."""
    gloo = Thr(tid_offset=1, name="pt_gloo_runloop", wait_timed=False)
    own = Proc(pid=300, role="process", stack=OWN_ALL_REDUCE, state="R", cpu_pct=90.0)
    with_gloo = build([dataclasses.replace(own, threads=[gloo])])
    alone = build([own])
    for bundle, kind in ((with_gloo, "collective"), (alone, None)):
        main = main_thread(bundle.samples[-1].processes[0])
        assert main is not None
        assert thread_wait(bundle, main).kind == kind


def test_a_lone_process_computing_in_its_own_all_reduce_is_slow() -> None:
    """The recording: slow, works_silently, no peers_wait behind it, no "peers" in the why."""
    v = classify(load_bundle(BUNDLES / "explore_cpu_in_wait_named_fn4.json"))
    assert (v.state, v.rule) == ("slow", "works_silently"), v.summary
    assert "peers_wait" not in {m.rule for m in v.also_matched}
    assert "spins" not in v.summary and "all_reduce" in v.summary
    assert v.suspects and all("peers" not in s.reason for s in v.suspects)


def test_a_worker_is_no_bottleneck_of_its_own_wait() -> None:
    """The suspect's "the bottleneck its peers wait for" needs a peer other than itself."""
    (p,) = extract(build([Proc(pid=400, role="process", cpu_pct=90.0, state="R")]))
    _, alone = work_story([p], [], [], [p], [p])
    assert "peers wait" not in alone[0].reason
    (q,) = extract(build([Proc(pid=401, role="process", stack=RANK_BARRIER)]))
    _, waited = work_story([p], [], [], [p, q], [p, q])
    assert waited[0].reason.startswith("the bottleneck its peers wait for")


# --- 2. poll loops the kernel shows ---------------------------------------------------------

SLEEP0_TID = 19587  # the scheduler (main thread) of sleep0_scheduler
ENGINE_PID = 25368  # the engine process of shm_yield_engine_idle


def test_a_sleep0_poll_loop_is_idle() -> None:
    bundle = load_bundle(BUNDLES / "explore_sleep0_scheduler.json")
    v = classify(bundle)
    assert (v.state, v.rule) == ("idle", "waits_for_outside"), v.summary
    assert "CPU-bound" not in v.summary and "busy-poll" in v.summary
    (p,) = extract(bundle)
    assert p.poll is not None and p.poll.markers == ("kernel-yield",)
    assert p.compute_pct < 1.0  # its CPU is the poll's, not work


def test_a_sched_yield_poll_loop_is_idle() -> None:
    bundle = load_bundle(BUNDLES / "explore_shm_yield_engine_idle.json")
    v = classify(bundle)
    assert (v.state, v.rule) == ("idle", "waits_for_outside"), v.summary
    engine = next(p for p in extract(bundle) if p.pid == ENGINE_PID)
    assert engine.poll is not None and engine.poll.markers == ("kernel-yield",)
    assert engine.poll.wait.label == "engine"


def test_one_long_computing_call_is_no_yield_loop() -> None:
    """Same frame and line in every sample, but its CPU is the user's: it computes."""
    bundle = load_bundle(BUNDLES / "explore_cpu_in_wait_named_fn4.json")
    alive = [s.processes[0] for s in bundle.samples]
    assert poll_loops(bundle, alive) == {}


def _user_time(data: Json, tid: int) -> Json:
    """The same thread with its kernel time moved to user time: work between short sleeps."""
    out = copy.deepcopy(data)
    for t in _threads(out, tid):
        t["utime_ticks"], t["stime_ticks"] = t["stime_ticks"] * 3, t["utime_ticks"] // 3
    return out


def test_work_between_short_sleeps_is_no_poll_loop(tmp_path: Path) -> None:
    """Thousands of sleeps a second on one line, but the CPU goes to user code: a compute
    step between ``sleep(0)`` calls - work, not polling (its CPU stays compute)."""
    bundle = _load(_user_time(_json("sleep0_scheduler"), SLEEP0_TID), tmp_path)
    (p,) = extract(bundle)
    assert p.poll is None
    assert classify(bundle).state != "idle"


def test_a_running_loop_in_user_space_is_no_yield_loop(tmp_path: Path) -> None:
    bundle = _load(_user_time(_json("shm_yield_engine_idle"), ENGINE_PID), tmp_path)
    engine = next(p for p in extract(bundle) if p.pid == ENGINE_PID)
    assert engine.poll is None and engine.compute_pct > 50


def test_kernel_time_that_moves_bytes_is_work(tmp_path: Path) -> None:
    """Kernel-heavy on one line while the process reads megabytes: a read loop, not a poll."""
    data = _json("shm_yield_engine_idle")
    for n, sample in enumerate(data["samples"]):
        for ps in sample["processes"]:
            if ps["pid"] == ENGINE_PID:
                ps["io"]["rchar"] = ps["io"].get("rchar", 0) + n * (20 << 20)
    bundle = _load(data, tmp_path)
    engine = next(p for p in extract(bundle) if p.pid == ENGINE_PID)
    assert engine.poll is None


def test_a_loop_whose_line_moves_is_no_yield_loop(tmp_path: Path) -> None:
    """A sample on another line of the loop (the work between polls): not one poll call."""
    data = _json("sleep0_scheduler")
    stack = data["stacks"][next(iter(_threads(data, SLEEP0_TID)))["stack_id"]]
    moved = copy.deepcopy(stack)
    moved["frames"][0]["line"] = 27
    data["stacks"]["moved"] = moved
    list(_threads(data, SLEEP0_TID))[1]["stack_id"] = "moved"
    bundle = _load(data, tmp_path)
    alive = [s.processes[0] for s in bundle.samples]
    assert yield_loop(bundle, alive, SLEEP0_TID) is None
