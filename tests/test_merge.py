"""``diag merge``: per-host bundles into one, on bundles recorded from real captures.

tests/data/merge/node-{a,b}.json are two real ``diag capture`` runs of tests/slurm/rank.py
(rank 0 and rank 1) relabelled as two hosts, node-b's clock 3.5 s ahead
(tests/data/merge/make_bundles.py re-records them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Tuple

import msgspec
import pytest
from conftest import run_diag

from diag.bundle.io import load_bundle, write_bundle
from diag.bundle.merge import HostPart, MissingHost, merge_bundles
from diag.commands.merge import describe_hosts
from diag.errors import EXIT_BAD_BUNDLE, EXIT_REMOTE, DiagError
from diag.model import Bundle, GpuDevice, GpuSample, RankCollectives, RankNcclLog

DATA = Path(__file__).resolve().parent / "data" / "merge"


@pytest.fixture
def two_hosts() -> Tuple[Bundle, Bundle]:
    return load_bundle(DATA / "node-a.json"), load_bundle(DATA / "node-b.json")


def test_processes_are_keyed_by_host_and_pid(two_hosts: Tuple[Bundle, Bundle]) -> None:
    a, b = two_hosts
    # The same PID on two hosts is two processes: give node-b node-a's PIDs.
    pid_a = a.processes[0].pid
    b = msgspec.structs.replace(
        b,
        processes=tuple(msgspec.structs.replace(p, pid=pid_a) for p in b.processes),
        samples=tuple(
            msgspec.structs.replace(
                s, processes=tuple(msgspec.structs.replace(p, pid=pid_a) for p in s.processes)
            )
            for s in b.samples
        ),
    )
    merged = merge_bundles([HostPart(bundle=a), HostPart(bundle=b)])
    keys = {(p.host, p.pid) for p in merged.processes}
    assert keys == {("node-a", pid_a), ("node-b", pid_a)}
    ranks = {p.host: p.rank for p in merged.processes}
    assert ranks == {"node-a": 0, "node-b": 1}
    for sample in merged.samples:
        assert {(p.host, p.pid) for p in sample.processes} == keys
    assert merged.target.hosts == ("node-a", "node-b")
    assert merged.verdict is None  # classified afterwards, across all ranks


def test_stacks_are_unioned_and_thread_ids_resolve(two_hosts: Tuple[Bundle, Bundle]) -> None:
    a, b = two_hosts
    merged = merge_bundles([HostPart(bundle=a), HostPart(bundle=b)])
    assert set(a.stacks) | set(b.stacks) == set(merged.stacks)
    ids = {t.stack_id for s in merged.samples for p in s.processes for t in p.threads}
    ids.discard(None)
    assert ids and ids <= set(merged.stacks)
    names = {f.name for st in merged.stacks.values() for f in st.frames}
    assert "wait_for_peers" in names


def test_unmeasured_skew_is_shown_not_hidden(two_hosts: Tuple[Bundle, Bundle]) -> None:
    a, b = two_hosts
    merged = merge_bundles([HostPart(bundle=a), HostPart(bundle=b)])
    entry = {h.name: h for h in merged.hosts}
    assert entry["node-a"].start_offset_s == 0.0
    expected = b.samples[0].t_s - a.samples[0].t_s
    assert entry["node-b"].start_offset_s == pytest.approx(expected, abs=1e-3)
    assert entry["node-b"].start_offset_s >= 3.5  # the recorded skew is in there
    assert entry["node-b"].clock_offset_s is None
    # sample times stay on each host's own clock
    by_host = {p.host: p.t_s for p in merged.samples[0].processes}
    assert by_host["node-b"] == b.samples[0].processes[0].t_s
    line = next(x for x in describe_hosts(merged) if x.startswith("node-b"))
    assert "not measured" in line and f"{expected:+.3f}s" in line


def test_measured_skew_is_recorded_and_corrects_start_offset(
    two_hosts: Tuple[Bundle, Bundle],
) -> None:
    a, b = two_hosts
    true_gap = (b.samples[0].t_s - 3.5) - a.samples[0].t_s
    merged = merge_bundles(
        [
            HostPart(bundle=a, clock_offset_s=0.0, clock_source="srun-ping"),
            HostPart(
                bundle=b, clock_offset_s=3.5, clock_offset_error_s=0.002, clock_source="srun-ping"
            ),
        ]
    )
    entry = {h.name: h for h in merged.hosts}["node-b"]
    assert entry.clock_offset_s == 3.5 and entry.clock_source == "srun-ping"
    assert entry.start_offset_s == pytest.approx(true_gap, abs=1e-3)
    line = next(x for x in describe_hosts(merged) if x.startswith("node-b"))
    assert "+3.500s ±0.002" in line


def test_missing_host_is_recorded_and_merge_made_from_the_rest(
    two_hosts: Tuple[Bundle, Bundle],
) -> None:
    a, _ = two_hosts
    merged = merge_bundles(
        [HostPart(bundle=a)],
        [MissingHost(name="node-c", reason="srun: error: node-c: Communication error")],
    )
    assert {p.host for p in merged.processes} == {"node-a"}
    failure = next(f for f in merged.failures if f.probe == "host")
    assert failure.host == "node-c" and "Communication error" in failure.reason
    entry = {h.name: h for h in merged.hosts}
    assert entry["node-c"].status == "failed"
    assert entry["node-a"].status == "ok"
    assert merged.target.hosts == ("node-a", "node-c")
    assert any("node-c: not captured" in x for x in describe_hosts(merged))


def test_no_host_at_all_is_an_error() -> None:
    with pytest.raises(DiagError) as info:
        merge_bundles([], [MissingHost(name="n1", reason="timed out after 60s")])
    assert info.value.exit_code == EXIT_REMOTE
    assert "n1" in info.value.message and "timed out" in info.value.message


def test_series_cut_to_the_shortest_host_and_counted(two_hosts: Tuple[Bundle, Bundle]) -> None:
    a, b = two_hosts
    short = msgspec.structs.replace(b, samples=b.samples[:2])
    merged = merge_bundles([HostPart(bundle=a), HostPart(bundle=short)])
    assert len(merged.samples) == 2
    assert [s.index for s in merged.samples] == [0, 1]
    entry = {h.name: h for h in merged.hosts}
    assert entry["node-a"].samples_dropped == len(a.samples) - 2
    assert entry["node-b"].samples_dropped == 0


def test_same_hostname_twice_stays_apart(two_hosts: Tuple[Bundle, Bundle]) -> None:
    a, _ = two_hosts
    merged = merge_bundles([HostPart(bundle=a), HostPart(bundle=a)])
    assert [h.name for h in merged.hosts] == ["node-a", "node-a#2"]
    assert len(merged.processes) == 2


def test_gpus_and_logs_are_labelled_with_their_host(two_hosts: Tuple[Bundle, Bundle]) -> None:
    a, b = two_hosts

    def with_gpu(bundle: Bundle, available: bool) -> Bundle:
        gpu = (
            GpuSample(available=True, devices=(GpuDevice(index=0, power_w=300.0),))
            if available
            else GpuSample(available=False, reason="NVML: driver not loaded")
        )
        return msgspec.structs.replace(
            bundle, samples=tuple(msgspec.structs.replace(s, gpu=gpu) for s in bundle.samples)
        )

    merged = merge_bundles(
        [HostPart(bundle=with_gpu(a, True)), HostPart(bundle=with_gpu(b, False))]
    )
    gpu = merged.samples[0].gpu
    assert gpu is not None and gpu.available
    assert [(d.host, d.index) for d in gpu.devices] == [("node-a", 0)]
    assert gpu.reason == "node-b: NVML: driver not loaded"


def test_merging_a_merge_keeps_host_labels(two_hosts: Tuple[Bundle, Bundle]) -> None:
    a, b = two_hosts
    ab = merge_bundles([HostPart(bundle=a), HostPart(bundle=b)])
    again = merge_bundles([HostPart(bundle=ab, label="ab"), HostPart(bundle=a, label="node-z")])
    assert {p.host for p in again.processes} == {"node-a", "node-b", "node-z"}
    assert [h.name for h in again.hosts] == ["node-a", "node-b", "node-z"]


def test_merged_bundle_round_trips(tmp_path: Path, two_hosts: Tuple[Bundle, Bundle]) -> None:
    a, b = two_hosts
    merged = merge_bundles([HostPart(bundle=a), HostPart(bundle=b)])
    write_bundle(merged, tmp_path / "m.json")
    assert load_bundle(tmp_path / "m.json") == merged


def test_cli_merge_with_an_unreadable_host(tmp_path: Path) -> None:
    broken = tmp_path / "node-c.json"
    broken.write_text("{ not json")
    out = tmp_path / "job.html"
    done = run_diag(
        ["merge", str(DATA / "node-a.json"), str(DATA / "node-b.json"), str(broken),
         "-o", str(out)]
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "merged 2 of 3 host(s)" in done.stdout
    assert "node-b" in done.stderr and "not measured" in done.stderr
    written = json.loads((tmp_path / "job.json").read_text())
    assert {p["host"] for p in written["processes"]} == {"node-a", "node-b"}
    failed = [f for f in written["failures"] if f["probe"] == "host"]
    assert failed and failed[0]["host"] == "node-c.json"
    assert "not a readable diag bundle" in failed[0]["reason"]


def test_cli_merge_nothing_readable(tmp_path: Path) -> None:
    done = run_diag(["merge", str(tmp_path / "nope.json"), "-o", str(tmp_path / "m")])
    assert done.returncode == EXIT_BAD_BUNDLE
    assert done.stderr.count("\n") == 1 and "cannot read" in done.stderr


def test_per_rank_evidence_is_kept_and_labelled(two_hosts: Tuple[Bundle, Bundle]) -> None:
    a, b = two_hosts
    a = msgspec.structs.replace(a, nccl_logs=(RankNcclLog(rank=0, timeout_seq=7),))
    b = msgspec.structs.replace(
        b,
        nccl_logs=(RankNcclLog(rank=1, timeout_seq=7),),
        collectives=(RankCollectives(rank=1, last_completed_seq=6),),
    )
    merged = merge_bundles([HostPart(bundle=a), HostPart(bundle=b)])
    assert [(x.host, x.rank) for x in merged.nccl_logs] == [("node-a", 0), ("node-b", 1)]
    assert [(x.host, x.rank) for x in merged.collectives] == [("node-b", 1)]


def test_the_same_host_in_two_merged_bundles_stays_apart(
    two_hosts: Tuple[Bundle, Bundle],
) -> None:
    a, b = two_hosts
    ab = merge_bundles([HostPart(bundle=a), HostPart(bundle=b)])
    twice = merge_bundles([HostPart(bundle=ab), HostPart(bundle=ab)])
    assert [h.name for h in twice.hosts] == ["node-a", "node-b", "node-a#2", "node-b#2"]
    assert len(twice.processes) == 4
    for sample in twice.samples:
        keys = [(p.host, p.pid) for p in sample.processes]
        assert len(keys) == len(set(keys)) == 4
    # a process whose name happens to be a host label keeps its name
    assert {p.name for p in twice.processes} == {p.name for p in ab.processes}
