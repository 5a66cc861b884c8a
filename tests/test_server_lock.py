"""A lock a server keeps for its clients that no live client can release (#34, miss 8): a
multiprocessing Manager's Lock whose holder was killed; and the manager's process is no rank."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import msgspec

from diag.bundle.io import load_bundle
from diag.collect.process_table import _serves_siblings
from diag.model import Bundle, Frame, ProcessSample, Stack, ThreadSample
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parent.parent / "samples" / "bundles"


def _orphaned() -> Bundle:
    return load_bundle(BUNDLES / "manager_lock_orphaned.json")


def _server_pid(bundle: Bundle) -> int:
    verdict = classify(bundle)
    assert verdict.state == "deadlocked" and verdict.rule == "lock_behind_clients"
    assert len(verdict.suspects) == 1
    return verdict.suspects[0].pid


def test_the_killed_holders_lock_is_deadlocked_and_the_manager_named() -> None:
    bundle = _orphaned()
    pid = _server_pid(bundle)
    server = next(p for p in bundle.processes if p.pid == pid)
    assert server.rank is None  # the manager is a server of the job, not a rank
    verdict = classify(bundle)
    assert "block on one lock in `Server.serve_client`" in verdict.summary
    assert "only polls on a timer" in verdict.summary


def _replace(bundle: Bundle, pid: int, change: Dict[str, object]) -> Bundle:
    samples = []
    for sample in bundle.samples:
        procs = tuple(
            msgspec.structs.replace(ps, **change) if ps.pid == pid else ps  # type: ignore[arg-type]
            for ps in sample.processes
        )
        samples.append(msgspec.structs.replace(sample, processes=procs))
    return msgspec.structs.replace(bundle, samples=tuple(samples))


def test_a_client_that_may_release_it_or_one_outside_the_job_keeps_it_open() -> None:
    bundle = _orphaned()
    server = _server_pid(bundle)
    root = bundle.target.root_pid
    assert root is not None
    # the parent (a client) holding no peer of the server's sockets any more: the peer of
    # that connection is held by no process of the job - a client outside may release it
    unseen = _replace(bundle, root, {"fd_ends": ()})
    assert classify(unseen).rule != "lock_behind_clients"
    # a server with a TCP port: clients from anywhere
    served = _replace(bundle, server, {"listen_ports": (8080,)})
    assert classify(served).rule != "lock_behind_clients"


def test_a_process_running_a_server_loop_of_the_job_is_no_rank_candidate() -> None:
    frames = (
        Frame(
            name="Server.serve_forever", filename="/usr/lib/python3.11/multiprocessing/managers.py"
        ),
        Frame(
            name="BaseProcess._bootstrap", filename="/usr/lib/python3.11/multiprocessing/process.py"
        ),
    )
    stacks = {"s1": Stack(frames=frames)}
    sample = ProcessSample(pid=7, threads=(ThreadSample(tid=7, stack_id="s1"),))
    assert _serves_siblings(sample, stacks)
    worker = {"s1": Stack(frames=(Frame(name="train", filename="/job/train.py"),))}
    assert not _serves_siblings(sample, worker)


def _with_ppid(bundle: Bundle, pid: int, ppid: int) -> Bundle:
    procs = tuple(
        msgspec.structs.replace(p, ppid=ppid) if p.pid == pid else p for p in bundle.processes
    )
    return msgspec.structs.replace(bundle, processes=procs)


def test_a_live_worker_polling_on_a_timer_may_hold_it_idle_and_named() -> None:
    """A worker holding the Manager Lock while it checks for a marker file every second
    (samples/scenarios/manager_lock_holder_polls.py): the kernel's picture of the orphaned
    lock - waiters on the manager, its thread on the lock, one other client asleep on a timer
    - but that client is no waiter's parent: it may hold the lock and release it at a wake."""
    bundle = load_bundle(BUNDLES / "manager_lock_holder_polls.json")
    verdict = classify(bundle)
    assert verdict.state == "idle" and verdict.rule == "lock_behind_clients", verdict.summary
    assert [s.rank for s in verdict.suspects] == [0]
    assert "rank 0 may: it is alive and polls on a timer in `publish`" in verdict.summary
    # the poller made the waiter's parent: it polls for its worker, not for a release
    waiter = next(p for p in bundle.processes if p.rank == 1)
    holder = next(p for p in bundle.processes if p.rank == 0)
    parented = _with_ppid(bundle, waiter.pid, holder.pid)
    assert classify(parented).state == "deadlocked"
    # and the orphaned lock's parent poller, were it no parent of the waiters: may hold it
    orphaned = _orphaned()
    root = orphaned.target.root_pid
    assert root is not None
    for p in orphaned.processes:
        if p.rank is not None:
            orphaned = _with_ppid(orphaned, p.pid, p.pid + 100000)
    assert classify(orphaned).state == "idle"
