"""What the situation measures is measured once per verdict: the start-up phases (read by the
output measures, the ``still_starting`` door, ``alone_in_phase`` and the classifier's phase
tail - each had measured them again), the frameworks' own pauses (read by ``flow_paused``
and the wait-for graph) and the log rhythm a short capture cannot judge (read by
``silence_within_rhythm`` and the hedge of the wait families' decisions). The participants'
file-lock waits are ``Situation.file_lock_waits`` for the two lock rules and the graph (which
asks alone of a process of its own wider set), the store join and its host's fate
``Situation.store_join`` and ``store_host`` for two rules and the graph."""

from __future__ import annotations

from typing import Any, Callable, Dict

import pytest

from diag.bundle.io import load_bundle
from diag.verdict import flow_control, rhythm, startup
from diag.verdict.classify import classify
from tests.conftest import REPO

# A start-up (ranks downloading), a framework's own pause, a file lock, a short capture of a
# slow log rhythm.
BUNDLES = (
    "gloo_download_slow_mirror",
    "dask_worker_paused",
    "file_lock_busy_holder",
    "gloo_step_rhythm_short",
)


@pytest.mark.parametrize("name", BUNDLES)
def test_one_verdict_measures_each_once(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Dict[str, int] = {}

    def counted(module: Any, attr: str) -> None:
        inner: Callable[..., Any] = getattr(module, attr)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[attr] = calls.get(attr, 0) + 1
            return inner(*args, **kwargs)

        monkeypatch.setattr(module, attr, wrapper)

    counted(startup, "_procs")  # one pass of startup_phases
    counted(flow_control, "_present")  # one pass of flow_stalls
    counted(rhythm, "_logs")  # twice (first and last sample) per pass of undecided
    bundle = load_bundle(REPO / "samples" / "bundles" / f"{name}.json")
    verdict = classify(bundle)
    assert verdict.rule
    assert calls.get("_procs", 0) == 1, calls
    assert calls.get("_present", 0) == 1, calls
    assert calls.get("_logs", 0) <= 2, calls
