"""Self-waits on built stacks: a thread blocked on a lock its own stack holds, and the shapes
that must not read so (an RLock re-entered by design, legitimate recursion)."""

from __future__ import annotations

from typing import List, Tuple

import msgspec
from series import THREADING, Proc, build

from diag.model import Bundle, Frame, Stack
from diag.verdict.classify import classify
from diag.verdict.features import extract
from diag.verdict.self_wait import self_waits, stack_self_wait

APP = "/job/shipper.py"
LOGGING = "/usr/lib/python3.11/logging/__init__.py"
Spec = Tuple[Tuple[str, str], ...]

# logger.info(...) down to the handler that takes the shipper's lock, innermost first
LOG_CALL: Spec = (
    ("Shipper.emit", APP),
    ("Handler.handle", LOGGING),
    ("Logger.callHandlers", LOGGING),
    ("Logger.handle", LOGGING),
    ("Logger._log", LOGGING),
    ("Logger.info", LOGGING),
)
HANDLER: Spec = (*LOG_CALL, ("on_alarm", APP))
BASE: Spec = (("Shipper._ship", APP), *LOG_CALL, ("main", APP), ("<module>", APP))


def _frames(spec: Spec) -> List[Frame]:
    return [Frame(name=n, filename=f, line=10 + i) for i, (n, f) in enumerate(spec)]


def test_signal_handler_taking_the_lock_its_interrupted_frame_holds() -> None:
    found = stack_self_wait(_frames(HANDLER + BASE))
    assert found is not None
    blocked, holder, boundary, kind, copies = found
    assert blocked.name == holder.name == "Shipper.emit" and blocked.line != holder.line
    assert boundary.name == "on_alarm" and kind == "signal handler" and copies == 2


def test_recursion_and_a_plain_lock_wait_are_not_self_waits() -> None:
    recursive = (*(("walk", APP) for _ in range(50)), ("main", APP))
    assert stack_self_wait(_frames(recursive)) is None
    plain = (("acquire", THREADING), ("Cache.get", APP), ("main", APP))
    assert stack_self_wait(_frames(plain)) is None


def test_finalizer_of_the_class_that_holds_the_lock() -> None:
    spec = (("Pool.__del__", APP), ("Pool.release", APP), ("main", APP))
    found = stack_self_wait(_frames(spec))
    assert found is not None and found[3] == "finalizer" and found[1].name == "Pool.release"


def _stable_lines(bundle: Bundle) -> Bundle:
    """The builder numbers lines by depth; a real suspended frame keeps its line as the stack
    grows on top of it, so give each (function, position from the bottom) a fixed line."""
    stacks = {
        sid: Stack(
            frames=tuple(
                msgspec.structs.replace(f, line=100 + len(st.frames) - i)
                for i, f in enumerate(st.frames)
            )
        )
        for sid, st in bundle.stacks.items()
    }
    return msgspec.structs.replace(bundle, stacks=stacks)


def _proc(stacks: List[Spec], state: str = "S") -> Proc:
    return Proc(pid=300, rank=None, role="process", stack=[list(s) for s in stacks],  # type: ignore[misc]
                state=state, wakeups_per_s=1.0, futex_op=0x189, wait_timed=False)  # fmt: skip


def test_stack_deepening_by_handler_frames_decides_deadlocked() -> None:
    stacks = [HANDLER + BASE, HANDLER * 2 + BASE, HANDLER * 3 + BASE]
    bundle = _stable_lines(build([_proc(stacks)], n=3))
    found = self_waits(bundle, extract(bundle))
    assert len(found) == 1 and found[0].grew_frames == 2 * len(HANDLER)
    verdict = classify(bundle)
    assert verdict.state == "deadlocked" and verdict.rule == "waits_on_itself"
    assert [s.pid for s in verdict.suspects] == [300]
    # the wording is the feature: it names the handler that re-took the lock, and the fix
    assert "`on_alarm`" in verdict.summary and "RLock" in verdict.summary


def test_an_unnamed_handler_is_found_by_the_growth_alone() -> None:
    tick: Spec = (("Shipper.emit", APP), ("Shipper.report", APP), ("tick", APP))
    stacks = [tick + BASE, tick * 2 + BASE, tick * 3 + BASE]
    bundle = _stable_lines(build([_proc(stacks)], n=3))
    found = self_waits(bundle, extract(bundle))
    assert len(found) == 1 and found[0].kind == "re-entered"
    assert found[0].boundary.name == "tick" and found[0].holder.name == "Shipper.emit"


def test_running_or_moving_threads_are_not_flagged() -> None:
    running = build([_proc([HANDLER + BASE] * 3, state="R")], n=3)
    assert self_waits(running, extract(running)) == []
    moved = build([_proc([HANDLER + BASE, BASE, HANDLER + BASE])], n=3)
    assert self_waits(moved, extract(moved)) == []


def test_blocked_on_a_logging_handler_lock_is_not_a_self_wait() -> None:
    """A handler that logs through *another* handler blocks on that handler's RLock, held by
    another thread: logging's own locks re-enter, so the repeat of Handler.handle is no
    self-wait."""
    spec = (("acquire", LOGGING), ("Handler.handle", LOGGING), ("Logger.callHandlers", LOGGING),
            ("Logger.info", LOGGING), ("Audit.emit", APP), ("Handler.handle", LOGGING),
            ("Logger.callHandlers", LOGGING), ("Logger.info", LOGGING), ("main", APP))  # fmt: skip
    assert stack_self_wait(_frames(spec)) is None


def test_a_finalizer_taking_the_lock_its_caller_holds_alone_in_its_process() -> None:
    """`Conn.__del__` runs inside `Pool.swap` (which holds the pool lock) and calls
    `Pool.checkin`, which takes it: another class, so only "no other thread ran" names it."""
    spec: Spec = (("Pool.checkin", APP), ("Conn.__del__", APP), ("Pool.swap", APP),
                  ("main", APP))  # fmt: skip
    alone = build([_proc([spec] * 3)], n=3)
    found = self_waits(alone, extract(alone))
    assert len(found) == 1 and found[0].kind == "finalizer" and found[0].inferred
    assert found[0].holder.name == "Pool.swap" and found[0].boundary.name == "Conn.__del__"
    assert classify(alone).rule == "waits_on_itself"


def test_a_finalizer_waiting_while_another_thread_is_blocked_on_a_lock_is_left_alone() -> None:
    from series import Thr

    spec: Spec = (("Pool.checkin", APP), ("Conn.__del__", APP), ("Pool.swap", APP),
                  ("main", APP))  # fmt: skip
    p = _proc([spec] * 3)
    p.threads = [Thr(tid_offset=1, stack=(("acquire", THREADING), ("worker", APP)),
                     futex_op=0x189, wait_timed=False)]  # fmt: skip
    pair = build([p], n=3)
    assert self_waits(pair, extract(pair)) == []
