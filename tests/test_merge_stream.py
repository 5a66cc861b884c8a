"""A merge folds its parts one at a time and keeps equal thread records once (issue 35).

The reference is the merge as it was: every part held, nothing shared (``Interner.bundle``
made the identity). The streamed merge must give the same bundle, record for record, the
same bytes and the same verdict; equal threads tuples of two hosts must be one object."""

from __future__ import annotations

from typing import Iterator, List

import msgspec
import pytest

from bench.scale import STORIES, Shape, host_parts, make_parts, story_missing
from diag.bundle.intern import Interner
from diag.bundle.merge import HostPart, MissingHost, merge_bundles
from diag.commands.capture import judged
from diag.model import Bundle, ProcessSample
from diag.verdict import features
from diag.verdict.proc_classes import class_key

SHAPE = Shape(hosts=4, per_host=3, threads=6, samples=3)


def _whole(story: str, monkeypatch: pytest.MonkeyPatch) -> Bundle:
    """The merge of every part built first, nothing shared: the path before folding."""
    with monkeypatch.context() as m:
        m.setattr(Interner, "bundle", lambda self, bundle: bundle)
        parts, missing, _ = make_parts(SHAPE, story)
        return merge_bundles(parts, missing)


def _by_host(sample_processes: tuple[ProcessSample, ...], pid: int) -> List[ProcessSample]:
    return [ps for ps in sample_processes if ps.pid == pid]


@pytest.mark.parametrize("story", STORIES)
def test_the_streamed_merge_is_the_whole_one(story: str, monkeypatch: pytest.MonkeyPatch) -> None:
    streamed = merge_bundles(host_parts(SHAPE, story), story_missing(SHAPE, story))
    whole = _whole(story, monkeypatch)
    assert streamed == whole
    assert msgspec.json.encode(streamed) == msgspec.json.encode(whole)
    a, b = judged(streamed).verdict, judged(whole).verdict
    assert a is not None and a == b


def test_equal_threads_of_two_hosts_are_one_object() -> None:
    merged = merge_bundles(host_parts(SHAPE, "healthy"))
    rank_pid = merged.processes[1].pid
    for sample in merged.samples:
        same = _by_host(sample.processes, rank_pid)
        assert len({ps.host for ps in same}) == SHAPE.hosts
        assert all(ps.threads is same[0].threads for ps in same)  # one tuple, every host
    # Across samples: a thread that did not change is one record, not one a sample.
    first, last = (
        _by_host(s.processes, rank_pid)[0] for s in (merged.samples[0], merged.samples[-1])
    )
    unchanged = [t for t in first.threads if t in last.threads]
    assert unchanged and all(any(t is u for u in last.threads) for t in unchanged)


def test_a_generator_is_read_one_part_at_a_time() -> None:
    """Each part is folded before the next is asked for; the originals are not what the merge
    holds (host 1's threads are host 0's tuple), and ``missing`` is read at the end."""
    seen: List[int] = []
    missing: List[MissingHost] = []
    originals: List[object] = []

    def parts() -> Iterator[HostPart]:
        for part in host_parts(SHAPE, "healthy"):
            seen.append(len(seen))
            originals.append(part.bundle.samples[0].processes[1].threads)
            yield part
        missing.append(MissingHost(name="node-0009", reason="srun: error: timed out"))

    merged = merge_bundles(parts(), missing)
    assert seen == list(range(SHAPE.hosts))
    held = [ps.threads for ps in merged.samples[0].processes if ps.pid == merged.processes[1].pid]
    assert held[1] is held[0] and held[1] is not originals[1]
    assert [e.name for e in merged.hosts if e.status == "failed"] == ["node-0009"]


def test_a_merge_of_merges_shares_its_renamed_hosts_threads() -> None:
    once = merge_bundles(host_parts(Shape(2, 2, 4, 2), "healthy"))
    twice = merge_bundles([HostPart(bundle=once), HostPart(bundle=once)])
    assert {e.name for e in twice.hosts} == {"node-0000", "node-0001", "node-0000#2", "node-0001#2"}
    tuples = {id(ps.threads) for s in twice.samples for ps in s.processes if ps.threads}
    assert len(tuples) < sum(1 for s in twice.samples for ps in s.processes if ps.threads)


def test_classes_do_not_depend_on_sharing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keyed by identity where tuples are shared, by content where they are not: a bundle
    decoded from JSON (nothing shared) forms the same classes as the merge it was written by."""
    merged = merge_bundles(host_parts(SHAPE, "diverged"))
    decoded = msgspec.json.decode(msgspec.json.encode(merged), type=Bundle)
    for bundle in (merged, decoded):
        assert not (bundle is decoded and bundle.samples[0].processes[1].threads
                    is bundle.samples[0].processes[4].threads)  # fmt: skip
    classes = [[p.series_class for p in features.extract(b)] for b in (merged, decoded)]
    assert classes[0] == classes[1] and len(set(classes[0])) < len(classes[0])
    infos = {(p.host, p.pid): p for p in decoded.processes}
    keys = [class_key(s, infos[k]) for k, s in features._series(decoded).items()]
    assert len(set(keys)) == len(set(classes[1]))
