"""A handler that sleeps gets its worker's advice (#34, lower item b): under an event loop of
coroutines, move the call off the loop; in a sync worker (gunicorn's default class), a timeout
or more workers - it has no event loop to move anything off."""

from __future__ import annotations

from pathlib import Path

from diag.bundle.io import load_bundle
from diag.model import Frame
from diag.verdict.classify import classify
from diag.verdict.waits import runs_coroutines

BUNDLES = Path(__file__).resolve().parent.parent / "samples" / "bundles"
LIB = "/usr/lib/python3.11/"


def test_an_asyncio_or_uvloop_stack_runs_coroutines_a_sync_workers_does_not() -> None:
    asyncio_stack = (
        Frame(name="generate", filename="/srv/app.py"),
        Frame(name="Handle._run", filename=LIB + "asyncio/events.py"),
        Frame(name="BaseEventLoop._run_once", filename=LIB + "asyncio/base_events.py"),
    )
    uvloop_stack = (
        Frame(name="generate", filename="/srv/app.py"),
        Frame(name="run", filename="/site-packages/uvloop/__init__.py"),
    )
    sync_stack = (
        Frame(name="wait_for_quota", filename="/srv/app.py"),
        Frame(name="SyncWorker.handle_request", filename="/site-packages/gunicorn/workers/sync.py"),
        Frame(name="SyncWorker.run", filename="/site-packages/gunicorn/workers/sync.py"),
    )
    assert runs_coroutines(asyncio_stack)
    assert runs_coroutines(uvloop_stack)
    assert not runs_coroutines(sync_stack)
    # a job's own function named like a loop's is not one
    assert not runs_coroutines((Frame(name="run", filename="/srv/runners.py"),))


def test_a_sync_worker_asleep_in_its_handler_gets_a_sync_workers_advice() -> None:
    verdict = classify(load_bundle(BUNDLES / "gunicorn_sync_handler_sleeps.json"))
    assert verdict.state == "slow" and verdict.rule == "requests_unanswered"
    assert "sync worker" in verdict.summary
    assert "event loop (`await" not in verdict.summary


def test_a_stuck_worker_beside_one_that_serves_is_named_not_nothing_moves() -> None:
    """#34 lower item c: one sync worker waits for good in its first request while the other
    answers: the server progresses, and the stuck worker is named as a suspect."""
    verdict = classify(load_bundle(BUNDLES / "gunicorn_one_worker_stuck.json"))
    assert verdict.state == "progressing" and verdict.rule == "answers_requests"
    assert "a worker of the same server" in verdict.summary
    assert "nothing" not in verdict.summary
    assert len(verdict.suspects) == 1
    # the port's closed connections are counted once, for every process sharing it
    assert verdict.summary.count("connection(s) accepted and closed") == 1


def test_a_worker_computing_a_long_request_is_busy_not_stuck() -> None:
    """gunicorn with two sync workers: one computes a 60 s CPU-bound request while the other
    answers health checks (recorded). The computing worker holds its request unanswered
    through the capture, as a stuck one does - but it burns a core: busy with a long request,
    not 'stuck, restart that worker' (which it read before)."""
    v = classify(load_bundle(BUNDLES / "gunicorn_long_request.json"))
    assert v.state == "progressing", v.summary
    assert "stuck, while the others serve" not in v.summary
