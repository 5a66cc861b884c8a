"""What bounds a process's CPU (issue #37), fast: the cgroup v2 reader on a recorded tree (this
machine's job cgroups are v1), the v1 reader on this machine's own /proc, the host's load, and
the verdict's rule that runnable is not blocked - over every recorded bundle."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from conftest import REPO

from diag.bundle.io import load_bundle
from diag.model import Bundle, ThreadSample
from diag.probes.cgroup_cpu import (
    CgroupMounts,
    CpuLimitReader,
    count_cpus,
    parse_cpu_max,
    parse_mountinfo,
    parse_proc_cgroup,
    read_host_load,
)
from diag.probes.procfs import ProcFS
from diag.verdict.classify import classify

BUNDLES = sorted((REPO / "samples" / "bundles").glob("*.json")) + sorted(
    (REPO / "tests" / "golden" / "bundles").glob("*.json")
)


def _fake_v2(tmp_path: Path) -> Tuple[ProcFS, CgroupMounts]:
    """A pod's cgroup v2 tree as the kernel writes it: the pod group sets 0.05 of a core, the
    container below it 'max'; the container throttled in 990 of 1,000 periods."""
    root = tmp_path / "cgroup"
    pod = root / "kubepods.slice" / "pod42"
    box = pod / "cri-containerd-abc.scope"
    box.mkdir(parents=True)
    (root / "cpu.max").write_text("max 100000\n")
    (root / "kubepods.slice" / "cpu.max").write_text("max 100000\n")
    (pod / "cpu.max").write_text("5000 100000\n")
    (pod / "cpu.stat").write_text(
        "usage_usec 4100000\nuser_usec 4000000\nsystem_usec 100000\n"
        "nr_periods 1000\nnr_throttled 990\nthrottled_usec 93000000\n"
    )
    (box / "cpu.max").write_text("max 100000\n")
    (box / "cpu.stat").write_text("usage_usec 4100000\nnr_periods 0\n")
    (box / "cpuset.cpus.effective").write_text("0-3,8\n")
    (box / "cpu.pressure").write_text(
        "some avg10=97.50 avg60=96.00 avg300=90.00 total=81234567\n"
        "full avg10=97.50 avg60=96.00 avg300=90.00 total=81234567\n"
    )
    proc = tmp_path / "proc" / "4242"
    proc.mkdir(parents=True)
    (proc / "cgroup").write_text("0::/kubepods.slice/pod42/cri-containerd-abc.scope\n")
    return ProcFS(tmp_path / "proc"), CgroupMounts(v2=(str(root), "/"))


def test_v2_reads_the_tightest_limit_up_the_tree_and_its_throttling(tmp_path: Path) -> None:
    procfs, mounts = _fake_v2(tmp_path)
    c = CpuLimitReader(procfs, mounts).read(4242, nice=19, policy=3)
    assert c.version == "v2"
    assert c.group == "/kubepods.slice/pod42/cri-containerd-abc.scope"
    assert c.limit_group == "/kubepods.slice/pod42"  # the pod's limit binds the container
    assert c.quota_cores == 0.05 and c.period_us == 100000
    assert (c.nr_periods, c.nr_throttled) == (1000, 990)
    assert c.throttled_ns == 93_000_000_000  # throttled_usec, in ns like v1's throttled_time
    assert (c.cpuset, c.cpuset_cpus) == ("0-3,8", 5)
    assert (c.pressure_some_avg10, c.pressure_some_total_us) == (97.5, 81234567)
    assert (c.nice, c.policy) == (19, "batch")


def test_v2_without_a_limit_reads_its_own_counters(tmp_path: Path) -> None:
    procfs, mounts = _fake_v2(tmp_path)
    pod = tmp_path / "cgroup" / "kubepods.slice" / "pod42"
    (pod / "cpu.max").write_text("max 100000\n")
    c = CpuLimitReader(procfs, mounts).read(4242)
    assert c.quota_cores is None and c.limit_group == ""
    assert c.nr_periods == 0


def test_a_group_outside_the_mount_or_climbing_out_of_it_is_not_read(tmp_path: Path) -> None:
    procfs, mounts = _fake_v2(tmp_path)
    (tmp_path / "proc" / "4242" / "cgroup").write_text("0::/../../etc\n")
    c = CpuLimitReader(procfs, mounts).read(4242)
    assert c.version == "v2" and c.quota_cores is None and c.nr_periods is None
    nested = CgroupMounts(v2=(str(tmp_path / "cgroup"), "/other"))
    (tmp_path / "proc" / "4242" / "cgroup").write_text("0::/kubepods.slice/pod42\n")
    assert CpuLimitReader(procfs, nested).read(4242).nr_periods is None


def test_parsers_on_kernel_text() -> None:
    assert parse_cpu_max("max 100000\n") == (None, 100000)
    assert parse_cpu_max("3000 100000") == (3000, 100000)
    assert parse_cpu_max("garbage") == (None, None)
    assert parse_proc_cgroup("4:cpu,cpuacct:/job\n0::/user.slice\n") == {
        "cpu": "/job",
        "cpuacct": "/job",
        "": "/user.slice",
    }
    assert count_cpus("0-1") == 2 and count_cpus("x") is None
    mounts = parse_mountinfo(
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
        "41 31 0:38 /sub /sys/fs/cgroup/uni\\040fied rw - cgroup2 cgroup2 rw\n"
    )
    assert mounts.cpu_v1 == ("/sys/fs/cgroup/cpu", "/")
    assert mounts.cpuset_v1 == ("/sys/fs/cgroup/cpuset", "/")
    assert mounts.v2 == ("/sys/fs/cgroup/uni fied", "/sub")


def test_this_machine_reads_its_own_process_and_load() -> None:
    c = CpuLimitReader(ProcFS()).read(os.getpid(), nice=0, policy=0)
    if c.version is None:
        pytest.skip("no cgroup cpu controller mounted here")
    assert c.period_us and c.nr_periods is not None
    load = read_host_load(ProcFS(), os.cpu_count() or 1)
    assert load.cpus >= 1 and load.runnable >= 1  # this test runs


def _thread_motion(bundle: Bundle, pid: int) -> List[Tuple[int, bool, bool]]:
    """Per thread of ``pid`` runnable (state R) in some sample: (tid, its run-queue delay grew
    by more than its CPU time and 0.1 s at least, its Python stack changed)."""
    clk = bundle.host.clk_tck or 100
    seen: Dict[int, List[ThreadSample]] = {}
    for s in bundle.samples:
        for p in s.processes:
            if p.pid == pid and p.status == "alive":
                for t in p.threads:
                    seen.setdefault(t.tid, []).append(t)
    out = []
    for tid, ts in seen.items():
        if not any(t.state == "R" for t in ts):
            continue
        a, b = ts[0], ts[-1]
        delay_s = (
            (b.run_delay_ns - a.run_delay_ns) / 1e9
            if a.run_delay_ns is not None and b.run_delay_ns is not None
            else 0.0
        )
        cpu_s = (b.utime_ticks + b.stime_ticks - a.utime_ticks - a.stime_ticks) / clk
        starved = delay_s >= 0.1 and delay_s > cpu_s
        moved = len({t.stack_id for t in ts if t.stack_id}) > 1
        out.append((tid, starved, moved))
    return out


@pytest.mark.parametrize("path", BUNDLES, ids=[p.stem for p in BUNDLES])
def test_no_recorded_verdict_calls_a_runnable_moving_process_deadlocked(path: Path) -> None:
    """Issue #37: a verdict never says deadlocked about a process with a thread the kernel
    reports runnable whose run-queue delay grew (faster than its CPU) or whose stack moved
    during the capture. Bundles recorded before run_delay_ns was read are judged on stack
    motion alone."""
    bundle = load_bundle(path)
    verdict = classify(bundle)
    if verdict.state != "deadlocked":
        return
    for s in verdict.suspects:
        moving = [m for m in _thread_motion(bundle, s.pid) if m[1] or m[2]]
        assert not moving, (path.stem, s.pid, s.reason, moving)


def test_the_throttled_rank_recorded_reads_slow_with_its_limit() -> None:
    """The capture of samples/scenarios/gloo_cpu_quota.py (rank 1 under 0.03 of a core,
    recorded by tests/test_machine_cpu_real.py's scenario): it had read "deadlocked: rank 1
    diverged; no CPU, I/O or log progress: kill the job"."""
    verdict = classify(load_bundle(REPO / "samples" / "bundles" / "gloo_cpu_quota.json"))
    assert (verdict.state, verdict.rule) == ("slow", "cpu_held_back"), verdict.summary
    assert verdict.summary.startswith(
        "slow: rank 1 is throttled by its cgroup's CPU limit (0.03 of a core, throttled in "
    ), verdict.summary
    assert "ranks 0, 2 wait for it in `all_reduce`" in verdict.summary
    assert "raise the limit; don't kill" in verdict.summary
    assert [s.rank for s in verdict.suspects] == [1]
    assert "peers_wait" in {m.rule for m in verdict.also_matched}  # what it had said


def test_a_diverged_rank_made_runnable_and_starved_is_slow_not_deadlocked() -> None:
    """gloo_diverge_sleep's odd rank sleeps outside the collective (deadlocked). The same
    recording with that rank's main thread runnable in every sample and its run-queue delay
    growing by most of the capture - a rank kept from the CPU, not one that left - reads slow,
    never deadlocked, and names the rank with its run-queue delay."""
    import msgspec

    path = REPO / "samples" / "bundles" / "gloo_diverge_sleep.json"
    bundle = load_bundle(path)
    before = classify(bundle)
    assert before.state == "deadlocked"
    (odd,) = [s for s in before.suspects if s.rank is not None][:1]
    samples = []
    for i, sample in enumerate(bundle.samples):
        procs = []
        for p in sample.processes:
            if p.pid == odd.pid:
                threads = tuple(
                    msgspec.structs.replace(t, state="R", run_delay_ns=int(1.6e9) * (i + 1))
                    if t.tid == p.pid
                    else t
                    for t in p.threads
                )
                p = msgspec.structs.replace(p, threads=threads, state="R")
            procs.append(p)
        samples.append(msgspec.structs.replace(sample, processes=tuple(procs)))
    after = classify(msgspec.structs.replace(bundle, samples=tuple(samples)))
    assert after.state == "slow", after.summary
    assert after.rule == "cpu_held_back"
    assert f"rank {odd.rank} runs, slowly" in after.summary, after.summary
    assert "run-queue delay" in after.summary and "runnable, not blocked" in after.summary
    assert "no CPU" not in after.summary and "deadlocked" not in after.summary
    assert before.rule in {m.rule for m in after.also_matched}
