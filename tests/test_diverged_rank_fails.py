"""A rank that ``peers_wait`` blames, whose log reports only failure, has that failure quoted:
the cause to fix (a save retried on a full disk), not only "look at rank 0"."""

from __future__ import annotations

from diag.bundle.io import load_bundle
from diag.verdict.classify import classify
from tests.conftest import REPO


def test_the_blamed_rank_s_failure_is_quoted() -> None:
    v = classify(load_bundle(REPO / "samples" / "bundles" / "gloo_ckpt_retry_full_disk.json"))
    assert v.rule == "peers_wait" and v.state == "deadlocked"
    assert "its log reports only failure" in v.summary
    assert "checkpoint save failed" in v.summary


def test_a_diverged_rank_without_failures_is_told_as_before() -> None:
    v = classify(load_bundle(REPO / "samples" / "bundles" / "gloo_diverge_sleep.json"))
    assert v.rule == "peers_wait"
    assert "its log reports only failure" not in v.summary
