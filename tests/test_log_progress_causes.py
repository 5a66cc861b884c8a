"""A log that moves is not a log that progresses: the lines programs diag had never seen wrote
while stuck, exactly as captured (``/tmp/explore``), and the progress logs beside them.

- a monitor thread reprints a frozen step with a new ``elapsed=`` and a decaying average;
- a status thread reprints frozen counts (``docs=0/100``) with a new ``elapsed=``;
- a supervisor logs its worker's pings ("worker N alive (ping K)"), no key=value at all;
"""

from __future__ import annotations

from typing import Tuple

import msgspec
from series import QUEUE, THREADING, Proc, Thr, build

from diag.model import Bundle
from diag.verdict.classify import classify
from diag.verdict.progress import is_heartbeat

STEP = (
    "2026-12-02 13:50:{:02d},465 INFO step 45/10000 loss=1.7597 elapsed={:.1f}s "
    "avg_samples_per_s={:.1f}"
)


def _steps(n: int, start: int = 0) -> Tuple[str, ...]:
    return tuple(STEP.format(17 + k, 0.5 * k, 45 * 32 / (0.5 * k)) for k in range(start + 1, n))


def _written_by(bundle: Bundle, pid: int) -> Bundle:
    """The bundle with every log held open by ``pid``, as the capture sees a writer's fds."""
    samples = tuple(
        msgspec.structs.replace(
            s, logs=tuple(msgspec.structs.replace(lg, pids=(pid,)) for lg in s.logs)
        )
        for s in bundle.samples
    )
    return msgspec.structs.replace(bundle, samples=samples)


# --- 1: time-like fields and a frozen progress counter ------------------------------------


def test_a_frozen_step_with_a_new_elapsed_and_a_decaying_average_is_a_heartbeat() -> None:
    """``step_log_elapsed``: the step, the loss frozen; elapsed= and the rate derived from it
    move every line. Neither is progress: the step is the counter, and it did not move."""
    lines = _steps(19)
    assert lines[0].endswith("step 45/10000 loss=1.7597 elapsed=0.5s avg_samples_per_s=2880.0")
    assert is_heartbeat(lines[11:], before=lines[:11])
    assert is_heartbeat(lines[11:])  # without history: the new lines alone say it
    captured = (
        "2026-12-02 13:50:25,972 INFO step 45/10000 loss=1.7597 elapsed=8.0s "
        "avg_samples_per_s=179.7",
        "2026-12-02 13:50:26,473 INFO step 45/10000 loss=1.7597 elapsed=8.5s "
        "avg_samples_per_s=169.2",
    )
    assert is_heartbeat(captured)


def test_a_step_that_advances_is_progress_whatever_else_stays() -> None:
    """Contrast: the step moves (a real loop), even with the loss and the rate unchanged."""
    lines = tuple(f"INFO step {45 + k}/10000 loss=1.7597 elapsed=9.0s" for k in range(4))
    assert not is_heartbeat(lines[2:], before=lines[:2])
    assert not is_heartbeat(("step 46 loss 1.1",), before=("step 45 loss 1.2",))
    assert not is_heartbeat(("step 45 loss 1.2", "step 46 loss 1.2", "step 47 loss 1.2"))


def test_frozen_counts_with_only_the_elapsed_time_moving_are_a_heartbeat() -> None:
    """``threadpool_nested_submit``: its status thread's line, counts frozen at 0."""
    lines = tuple(f"progress: docs=0/100 chunks=0 elapsed={s}s" for s in range(1, 9))
    assert is_heartbeat(lines[6:], before=lines[:6])
    # one new line, the same counts as the last one before it
    assert is_heartbeat(lines[-1:], before=lines[:-1])
    moved = "progress: docs=1/100 chunks=4 elapsed=9s"
    assert not is_heartbeat((moved,), before=lines)


def test_clocks_and_durations_are_not_reported_quantities() -> None:
    """A report whose only moving values are times: uptime, a wall clock, a duration with its
    unit stuck to it, an ETA - all move while nothing else does."""
    up = tuple(f"[svc] uptime={u} queued=3 active=1 eta={90 - u}" for u in (10, 12, 14))
    assert is_heartbeat(up[1:], before=up[:1])
    took = tuple(f"[svc] queued=3 wall_s={w} last=12.5ms" for w in (3.1, 5.2, 7.4))
    assert is_heartbeat(took[1:], before=took[:1])
    # a size called batch or tokens is no position: the loss moving is what counts
    sized = tuple(f"batch=32 tokens=4096 loss={x}" for x in (0.52, 0.49, 0.47))
    assert not is_heartbeat(sized[1:], before=sized[:1])
    # a coarse counter (the epoch) stays for minutes: the loss decides
    epoch = ("epoch=3 loss=0.52", "epoch=3 loss=0.49")
    assert not is_heartbeat(epoch[1:], before=epoch[:1])


def test_the_monitor_thread_of_a_dead_prefetcher_is_no_output() -> None:
    """The job of ``step_log_elapsed``: the main thread in Queue.get, its monitor thread
    asleep between two lines, the log growing by frozen steps - and the process's wchar a
    line more than the log grew (the two read at two instants of a sample): no progress."""
    main = (("wait", THREADING), ("get", QUEUE), ("<module>", "/job/train.py"))
    monitor = Thr(
        1,
        stack=(("monitor", "/job/train.py"), ("run", THREADING)),
        syscall="clock_nanosleep",
        wchan="hrtimer_nanosleep",
        wait_timed=True,
    )
    lines = _steps(19)
    log = [(1011, 11, lines[:11]), (1379, 15, lines[:15]), (1747, 19, lines)]
    proc = Proc(30, role="process", stack=main, threads=[monitor], wchar_per_s=207.0)
    verdict = classify(_written_by(build([proc], logs={"/job/train.log": log}), 30))
    assert verdict.state != "progressing" and verdict.rule != "output_moves", verdict.summary


# --- 2: one template of liveness, a counter moving ----------------------------------------


PINGS = tuple(
    f"13:50:{3 + k // 2:02d} supervisor: worker 19992 alive (ping {21 + k})" for k in range(23)
)


def test_a_supervisors_ping_log_is_a_heartbeat() -> None:
    """``heartbeat_pingpong``: no key=value, one template, a ping count and a clock moving."""
    assert PINGS[0] == "13:50:03 supervisor: worker 19992 alive (ping 21)"
    assert is_heartbeat(PINGS[4:], before=PINGS[:4])
    for words in ("keepalive #{} ok", "heartbeat {}", "tick {} - still running", "pong {}"):
        assert is_heartbeat(tuple(words.format(k) for k in range(5))), words


def test_one_template_with_a_step_moving_is_progress() -> None:
    """Contrast: the same shape with a step counter, or without liveness words, is work."""
    assert not is_heartbeat(tuple(f"worker 3 alive, step {k}" for k in range(45, 50)))
    assert not is_heartbeat(tuple(f"13:50:0{k} trained shard {k} of 9" for k in range(5)))
    assert not is_heartbeat(("step 45 done", "step 46 done", "step 47 done"))
    # "mapping", "shipping": no liveness word inside another word
    assert not is_heartbeat(tuple(f"shipping batch {k}" for k in range(4)))
