"""The verdict's one index of what it derives from a bundle (#31 "measured once",
``diag.verdict.bundle_index``): an entry answers only for the very object it was derived
from, and nothing of a bundle is kept once its verdict is judged."""

from __future__ import annotations

from pathlib import Path

from diag.bundle.io import load_bundle
from diag.verdict import bundle_index
from diag.verdict.bundle_index import derived, judging, keep, known
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"


def test_an_entry_answers_for_its_own_source_only() -> None:
    a, b = [1], [1]  # equal, not the same
    calls = []
    with judging():
        assert derived("n", a, lambda: calls.append("a") or "A") == "A"
        assert derived("n", a, lambda: calls.append("again") or "?") == "A"
        assert derived("n", b, lambda: calls.append("b") or "B") == "B"
        assert derived("t", (a, b), lambda: "AB") == "AB"
        assert derived("t", (a, b), lambda: "?") == "AB"
        assert derived("t", (b, a), lambda: "BA") == "BA"
        keep("k", a, 7)
        assert known("k", a) == 7 and known("k", b) is None
    assert calls == ["a", "b"]
    assert not bundle_index._entries


def test_nothing_of_a_bundle_is_kept_once_its_verdict_is_judged() -> None:
    bundle = load_bundle(BUNDLES / "native_spin_dead_peer.json")
    with judging():  # a verdict inside another scope (a caller's): emptied when both end
        classify(bundle)
        assert bundle_index._entries
    assert not bundle_index._entries
    classify(bundle)
    assert not bundle_index._entries
