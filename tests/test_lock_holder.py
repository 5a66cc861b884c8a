"""Who holds the lock a process's threads block on when none runs (#34, lower item d): a
ThreadPoolExecutor worker parked on an event while holding it is named; with no such thread
(the holder died), the verdict says so instead of naming idle consumers."""

from __future__ import annotations

from pathlib import Path

from diag.bundle.io import load_bundle
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parent.parent / "samples" / "bundles"


def test_the_pools_worker_parked_on_an_event_is_named_as_the_holder() -> None:
    verdict = classify(load_bundle(BUNDLES / "pool_worker_holds_lock.json"))
    assert verdict.state == "deadlocked" and verdict.rule == "blocked_on_itself"
    assert "held by thread indexer_0" in verdict.summary
    assert "`Event.wait` ← `refresh_index`" in verdict.summary


def test_a_lock_whose_holder_died_names_no_idle_consumer() -> None:
    verdict = classify(load_bundle(BUNDLES / "abandoned_lock.json"))
    assert verdict.state == "deadlocked"
    assert "held by" not in verdict.summary
    assert "most likely died holding it" in verdict.summary
