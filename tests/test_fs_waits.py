"""Uninterruptible I/O has an owner: the mountinfo parser and mount lookup on recorded text,
the daemon behind a FUSE mount, and a real stalled FUSE read under `diag capture` (root and
/dev/fuse needed; skipped elsewhere)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
from conftest import SCENARIOS, run_diag, start_ready

from diag.probes.mounts import fs_kind, mount_of, parse_mountinfo, waits_on_filesystem

MOUNTINFO = r"""22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw
45 22 0:40 / /mnt/gcs rw,nosuid,relatime shared:30 - fuse.gcsfuse my-bucket rw,user_id=0
46 22 0:52 / /data rw,relatime shared:31 - nfs4 10.0.0.5:/export rw,vers=4.2
47 22 0:53 / /mnt/with\040space rw - fuse.juicefs redis://meta rw
bad line without separator
48 45 0:54 / /mnt/gcs/inner rw - tmpfs tmpfs rw
"""


def test_mountinfo_parsed_and_a_path_finds_its_mount() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    assert len(mounts) == 5
    gcs = mount_of("/mnt/gcs/shards/0.bin", mounts)
    assert gcs is not None and (gcs.fstype, gcs.source, gcs.dev_minor) == (
        "fuse.gcsfuse",
        "my-bucket",
        40,
    )
    assert mount_of("/mnt/gcs/inner/x", mounts).fstype == "tmpfs"  # type: ignore[union-attr]
    assert mount_of("/mnt/gcsx/y", mounts).mount_point == "/"  # type: ignore[union-attr]
    assert mount_of("/mnt/with space/f", mounts).fstype == "fuse.juicefs"  # type: ignore[union-attr]
    assert [fs_kind(m.fstype) for m in mounts] == ["local", "fuse", "network", "fuse", "local"]


def test_which_sleeps_are_filesystem_waits() -> None:
    assert waits_on_filesystem("S", "request_wait_answer")
    assert waits_on_filesystem("D", "folio_wait_bit_common")
    assert waits_on_filesystem("S", "rpc_wait_bit_killable")
    assert not waits_on_filesystem("S", "futex_wait_queue")
    assert not waits_on_filesystem("R", None)


def _fuse_ok() -> bool:
    return os.geteuid() == 0 and os.path.exists("/dev/fuse")


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
@pytest.mark.skipif(not _fuse_ok(), reason="needs root and /dev/fuse to mount a FUSE daemon")
def test_a_rank_stalled_on_a_fuse_read_names_the_daemon(tmp_path: Path) -> None:
    started = start_ready([sys.executable, str(SCENARIOS / "fuse_stalled_read.py")], timeout_s=240)
    try:
        out = tmp_path / "b.json"
        done = run_diag(["capture", "--pid", str(started.pid), "-o", str(out)], timeout_s=300)
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    bundle = json.loads(out.read_text())
    waits = bundle["samples"][-1]["fs_waits"]
    assert waits and waits[0]["kind"] == "fuse" and waits[0]["fstype"] == "fuse.stallfs"
    verdict = bundle["verdict"]
    assert verdict["rule"] == "waits_on_filesystem", verdict["summary"]
    assert verdict["state"] == "deadlocked"
    daemon = waits[0]["daemon_pid"]
    assert daemon and [s["pid"] for s in verdict["suspects"]] == [daemon]


def _stalled(daemon_state: str) -> object:
    import msgspec
    from series import TORCH, Proc, build

    from diag.model import FsWait

    waiter = Proc(pid=10, rank=0, world_size=2, rank_source="env:RANK",
                  stack=(("all_reduce", TORCH), ("main", "/job/train.py")))  # fmt: skip
    reader = Proc(pid=11, rank=1, world_size=2, rank_source="env:RANK",
                  stack=(("load_shard", "/job/train.py"), ("main", "/job/train.py")),
                  wchan="request_wait_answer", syscall="read", syscall_fd=3)  # fmt: skip
    bundle = build([waiter, reader], n=3)
    wait = FsWait(pid=11, tid=11, path="/mnt/gcs/shard0.bin", mount_point="/mnt/gcs",
                  fstype="fuse.gcsfuse", source="bucket", kind="fuse", daemon_pid=77,
                  daemon_name="gcsfuse", daemon_state=daemon_state)  # fmt: skip
    samples = tuple(msgspec.structs.replace(s, fs_waits=(wait,)) for s in bundle.samples)
    return msgspec.structs.replace(bundle, samples=samples)


def test_the_daemon_decides_the_state_and_is_the_suspect() -> None:
    from diag.verdict.classify import classify

    asleep = classify(_stalled("S"))  # type: ignore[arg-type]
    assert asleep.rule == "waits_on_filesystem" and asleep.state == "deadlocked"
    assert [s.pid for s in asleep.suspects] == [77]
    assert asleep.suspects[0].chain.startswith("rank 0 → (peer) → rank 1 → (FUSE read of")
    stopped = classify(_stalled("T"))  # type: ignore[arg-type]
    assert (stopped.rule, stopped.state) == ("waits_on_filesystem", "deadlocked")
    assert [s.pid for s in stopped.suspects] == [77]
    assert "kill -CONT 77" in stopped.summary  # the wording is the feature: the remedy
    working = classify(_stalled("R"))  # type: ignore[arg-type]
    assert (working.rule, working.state) == ("waits_on_filesystem", "slow")
    assert [s.pid for s in working.suspects] == [77]
    assert "wait, don't kill" in working.summary  # the wording is the feature: the advice
