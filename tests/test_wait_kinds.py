"""The wait kinds are one closed set (``diag.vocab.WaitKind``): every kind a table, the kernel
or a finder gives is a member, and each member either has a family or is one of the few the
graph reads by kind alone. Two kinds were in no table at all: ``disk`` (uninterruptible sleep)
and ``blocked`` (a sleep whose wait channel and syscall no table names)."""

from __future__ import annotations

from typing import get_args

from diag.model import Bundle, ThreadSample
from diag.verdict.thread_wait import thread_wait
from diag.verdict.waits import _PRIORITY, _SYSCALLS, _WCHAN_PREFIXES, FAMILY
from diag.vocab import WAIT_KINDS, FrameWaitKind

# Read by the graph's edges (a pipe's reader, a fifo's other end, storage), not by a family.
NO_FAMILY = {"write-full", "fifo-open", "disk", "blocked"}


def test_every_kind_has_a_family_or_is_read_by_kind() -> None:
    assert set(FAMILY) | NO_FAMILY == set(WAIT_KINDS)
    assert not set(FAMILY) & NO_FAMILY


def test_the_tables_name_only_members() -> None:
    named = {*_SYSCALLS.values(), *(k for _, k in _WCHAN_PREFIXES), *_PRIORITY}
    assert named <= set(WAIT_KINDS)
    assert set(_PRIORITY) == set(get_args(FrameWaitKind))  # a frame's kinds rank against each other


def test_the_kinds_in_no_table_come_from_the_thread_state() -> None:
    bundle = Bundle()
    disk = ThreadSample(tid=1, state="D", wchan="nfs_wait_bit_killable")
    odd = ThreadSample(tid=2, state="S", wchan="some_driver_wait", syscall="ioctl")
    assert thread_wait(bundle, disk).kind == "disk"
    assert thread_wait(bundle, odd).kind == "blocked"
