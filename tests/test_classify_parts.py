"""Unit tests of the verdict's parts: known waits, heartbeat logs, equivalence classes."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import pytest
from series import BARRIER_STACK, Proc, build

from diag.model import Frame, RankClass
from diag.verdict.equivalence import odd_classes, rank_classes
from diag.verdict.features import extract
from diag.verdict.progress import is_heartbeat
from diag.verdict.waits import family, kernel_wait, stack_wait
from diag.verdict.wording import ranges

LIB = "/usr/lib/python3.11"
TORCH = "/venv/lib/python3.11/site-packages/torch"


def _frames(*spec: Tuple[str, str]) -> Sequence[Frame]:
    return tuple(Frame(name=n, filename=f, line=1) for n, f in spec)


@pytest.mark.parametrize(
    "frames,kind",
    [
        (
            (("all_reduce", f"{TORCH}/distributed/distributed_c10d.py"), ("step", "/j/t.py")),
            "collective",
        ),
        ((("wrapper", f"{TORCH}/distributed/c10d_logger.py"), ("step", "/j/t.py")), None),
        ((("synchronize", f"{TORCH}/cuda/__init__.py"), ("step", "/j/t.py")), "synchronize"),
        (
            (
                ("Condition.wait", f"{LIB}/threading.py"),
                ("Queue.get", f"{LIB}/queue.py"),
                ("work", "/j/w.py"),
            ),
            "queue",
        ),
        (
            (
                ("EpollSelector.select", f"{LIB}/selectors.py"),
                ("BaseEventLoop._run_once", f"{LIB}/asyncio/base_events.py"),
                ("main", "/j/s.py"),
            ),
            "event-loop",
        ),
        (
            (
                ("Thread._wait_for_tstate_lock", f"{LIB}/threading.py"),
                ("Thread.join", f"{LIB}/threading.py"),
                ("main", "/j/m.py"),
            ),
            "join",
        ),
        (
            (
                ("_ConnectionBase.recv", f"{LIB}/multiprocessing/connection.py"),
                ("worker", "/j/w.py"),
            ),
            "queue",
        ),
        (
            (
                ("_new_process_group_helper", f"{TORCH}/distributed/distributed_c10d.py"),
                ("init_process_group", f"{TORCH}/distributed/distributed_c10d.py"),
            ),
            "rendezvous",
        ),
        # a user function called `get` is not a queue wait; nor is compute in user code
        ((("get", "/j/cache.py"), ("main", "/j/m.py")), None),
        ((("dequantize_int4", "/j/load.py"),), None),
        # the scan stops at the first user frame: a barrier far below does not count
        ((("compute", "/j/m.py"), ("barrier", f"{TORCH}/distributed/distributed_c10d.py")), None),
        # py-spy short filenames (no directory) still count as stdlib plumbing
        ((("wait", "threading.py"), ("get", "queue.py"), ("loop", "w.py")), "queue"),
    ],
)
def test_stack_wait_kinds(frames: Sequence[Tuple[str, str]], kind: Optional[str]) -> None:
    found = stack_wait(_frames(*frames))
    assert (found[0] if found else None) == kind


@pytest.mark.parametrize(
    "wchan,syscall,kind",
    [
        ("futex_wait_queue", "futex", "lock"),
        ("futex_do_wait", None, "lock"),
        ("futex_wait_queue_me", None, "lock"),
        ("do_epoll_wait", None, "event-loop"),
        (None, "epoll_pwait", "event-loop"),
        ("hrtimer_nanosleep", "clock_nanosleep", "sleep"),
        ("do_wait", "wait4", "child"),
        ("0", "running", None),
        (None, None, None),
    ],
)
def test_kernel_waits(wchan: Optional[str], syscall: Optional[str], kind: Optional[str]) -> None:
    assert kernel_wait(wchan, syscall) == kind


def test_families() -> None:
    assert family("collective") == family("synchronize") == "peer"
    assert family("queue") == family("event-loop") == "serve"
    assert family(None) is None


@pytest.mark.parametrize(
    "lines,heartbeat",
    [
        (
            ("[W] still waiting for rank 3 after 30 s", "[W] still waiting for rank 3 after 60 s"),
            True,
        ),
        (("Watchdog caught collective operation timeout: seq 41",), True),
        (("step 10 loss 1.2", "step 11 loss 1.1"), False),
        (("loading shard 3/80", "loading shard 4/80"), False),
        ((), False),
    ],
)
def test_heartbeat_lines(lines: Tuple[str, ...], heartbeat: bool) -> None:
    assert is_heartbeat(lines) is heartbeat


def test_equivalence_classes_name_the_odd_rank() -> None:
    procs = [Proc(pid=10 + r, rank=r, world_size=4) for r in range(4)]
    procs[2] = Proc(pid=12, rank=2, world_size=4, stack=BARRIER_STACK)
    bundle = build(procs)
    classes = rank_classes(bundle, extract(bundle))
    assert [c.ranks for c in classes] == [(0, 1, 3), (2,)]
    assert "barrier" in classes[1].label and "refresh_cache" in classes[1].label
    assert [c.ranks for c in odd_classes(classes)] == [(2,)]


def test_no_odd_class_without_a_majority() -> None:
    a = RankClass(signature="a", label="a", ranks=(0,), pids=(1,))
    b = RankClass(signature="b", label="b", ranks=(1,), pids=(2,))
    assert odd_classes([a, b]) == []
    assert odd_classes([a]) == []


def test_rank_ranges() -> None:
    assert ranges([0, 1, 2, 5, 7, 8]) == "0\u20132, 5, 7\u20138"
    assert ranges([3]) == "3"
