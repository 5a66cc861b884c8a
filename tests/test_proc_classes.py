"""Features judged once per class of processes whose series read the same (issue 35).

The class is exact: every member must get the features a fresh reading of its own series
gives, and its own containers; a process that differs in one thread's ticks is no member."""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import List

import msgspec
import pytest

from bench.scale import Shape, make_parts
from diag.bundle.merge import merge_bundles
from diag.model import Bundle, ProcessInfo
from diag.verdict import features
from diag.verdict.proc_classes import class_key


def _merged(story: str, hosts: int = 4) -> Bundle:
    parts, missing, _ = make_parts(Shape(hosts, 3, 6, 3), story)
    return merge_bundles(parts, missing)


def _fresh(bundle: Bundle) -> List[features.ProcSignals]:
    """Every process read on its own, no class shared."""
    infos = {(p.host, p.pid): p for p in bundle.processes}
    clk = bundle.host.clk_tck or 100
    return [
        features._signals(bundle, key, infos.get(key, ProcessInfo(pid=key[1])), series, clk, {})
        for key, series in features._series(bundle).items()
    ]


def test_members_get_what_their_own_series_gives() -> None:
    for story in ("healthy", "diverged", "clock"):
        bundle = _merged(story)
        infos = {(p.host, p.pid): p for p in bundle.processes}
        keys = [class_key(s, infos[k]) for k, s in features._series(bundle).items()]
        assert len(set(keys)) < len(keys)  # classes formed: the same local rank on each node
        procs = features.extract(bundle)
        assert [replace(p, series_class=None) for p in procs] == _fresh(bundle)
        by_class = {p.series_class: p for p in procs}
        assert len(by_class) == len(set(keys))  # one class id per key


def test_members_do_not_share_containers() -> None:
    procs = features.extract(_merged("healthy"))
    first, other = procs[1], next(p for p in procs[2:] if p.pid == procs[1].pid)
    assert first.key != other.key and first.samples == other.samples
    other.samples.append(99)
    assert first.samples != other.samples


def test_one_tick_apart_is_another_class() -> None:
    bundle = _merged("diverged", hosts=2)
    sample = bundle.samples[-1]
    ps = sample.processes[1]
    thread = msgspec.structs.replace(ps.threads[0], utime_ticks=ps.threads[0].utime_ticks + 1)
    changed = msgspec.structs.replace(ps, threads=(thread, *ps.threads[1:]))
    records = (*sample.processes[:1], changed, *sample.processes[2:])
    last = msgspec.structs.replace(sample, processes=records)
    bundle = msgspec.structs.replace(bundle, samples=(*bundle.samples[:-1], last))
    procs = features.extract(bundle)
    assert [replace(p, series_class=None) for p in procs] == _fresh(bundle)


def test_verdict_is_the_same_without_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: every finder that asks once per class (``per_class``, ``unless_found_
    nothing``) answers as it does when each process is its own class."""
    classify_module = importlib.import_module("diag.verdict.classify")

    for story in ("healthy", "diverged", "missing", "clock"):
        bundle = _merged(story, hosts=5)
        with_classes = classify_module.classify(bundle)
        with monkeypatch.context() as m:
            m.setattr(features, "class_key", lambda series, info, shared: None)
            # a new samples tuple: nothing memoised on the first one is asked again
            fresh = msgspec.structs.replace(bundle, samples=tuple(list(bundle.samples)))
            alone = classify_module.classify(fresh)
        assert with_classes == alone
