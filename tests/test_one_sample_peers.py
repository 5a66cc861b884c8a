"""One sample of a healthy job's ranks met in a collective is no deadlock (#33 monitor rows).

A watch's first sample, or ``diag capture --count 1``, has no deltas: "nothing moves" cannot
be measured. Ranks of a healthy gloo training job caught in ``all_reduce`` together - or one
of them in its forward while the other waits - read "deadlocked ... kill the job" in 5 of 8
one-sample captures (and once in ``bench.monitor``'s 100 healthy watch samples). Now that
reads unknown, with what each rank waits in and "take more samples before acting"; ranks
waiting in two *different* collectives (a mismatch one sample does show) stay deadlocked
(tests/test_classify.py's one-sample cases).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.bundle.io import load_bundle
from diag.verdict.classify import ONE_SNAPSHOT_CHAINS, classify

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"


@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("gloo_train_one_sample", "ranks 0\u20131 wait in `all_reduce` ← `main`"),
        ("gloo_train_one_sample_forward", "rank 0 waits in `Linear.forward`"),
    ],
)
def test_one_sample_of_ranks_met_in_a_collective_is_unknown(name: str, where: str) -> None:
    bundle = load_bundle(BUNDLES / f"{name}.json")
    assert len(bundle.samples) == 1
    v = classify(bundle)
    assert (v.state, v.rule) == ("unknown", "peers_wait"), v.summary
    assert v.summary.startswith("unknown: one snapshot: ")
    assert where in v.summary
    assert "kill" not in v.summary and not v.suspects
    assert "take more samples before acting" in v.summary
    # The graph still draws the snapshot's chains ("kill it" of a cycle): qualified.
    assert v.graph is not None and v.graph.chains
    assert ONE_SNAPSHOT_CHAINS in v.warnings
