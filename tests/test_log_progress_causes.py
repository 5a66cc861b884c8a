"""A log that moves is not a log that progresses: the lines programs diag had never seen wrote
while stuck, exactly as captured (``/tmp/explore``), and the progress logs beside them.

- a monitor thread reprints a frozen step with a new ``elapsed=`` and a decaying average;
- a status thread reprints frozen counts (``docs=0/100``) with a new ``elapsed=``;
- a supervisor logs its worker's pings ("worker N alive (ping K)"), no key=value at all;
- a tqdm bar redrawn with ``\\r`` at the same n (a keep-alive refresh), or advancing while
  its percentage stays at 0%.
"""

from __future__ import annotations

from typing import List, Tuple

import msgspec
from series import QUEUE, THREADING, Proc, Thr, build

from diag.model import Bundle
from diag.verdict.classify import classify
from diag.verdict.features import extract
from diag.verdict.progress import is_heartbeat, log_growth
from diag.verdict.startup import startup_phases
from diag.verdict.startup_signs import LOADING

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


# --- 3: tqdm bars: n/total only -------------------------------------------------------------


EPOCH = "epoch 3:  45%|\u2588\u2588\u2588\u2588\u258c     | 9/20 [00:{:02d}<00:00, 19.09it/s]"
SCORE = "scoring:   0%|          | {}/100000 [00:{:02d}<6:5{}:07,  3.98it/s]"
LOAD = (
    "Loading safetensors checkpoint shards:  45%|\u2588\u2588\u2588\u2588\u258c     | "
    "{}/20 [00:{:02d}<00:01,  6.68it/s]"
)
CRASH = ('    raise RuntimeError("fetch thread crashed")', "RuntimeError: fetch thread crashed")


def test_a_bar_redrawn_at_the_same_n_is_a_heartbeat() -> None:
    """``tqdm_stuck_epoch``: a keep-alive thread refreshes the bar, its elapsed time moves."""
    assert is_heartbeat((EPOCH.format(9),), before=(*CRASH, EPOCH.format(5)))
    # a redraw of the very same text (nothing new in the tail at all)
    assert is_heartbeat((EPOCH.format(9),), before=(EPOCH.format(9),))
    # with the redraws still in one line, as the file holds them
    joined = "\r".join(EPOCH.format(s) for s in (7, 8, 9))
    assert is_heartbeat((joined,), before=(EPOCH.format(5),))


def test_a_bar_whose_n_moves_is_progress_even_at_zero_percent() -> None:
    """``tqdm_advancing``: 100,000 items, 0% all along, n 14 -> 22 -> 30."""
    assert not is_heartbeat((SCORE.format(30, 7, 7),), before=("READY", SCORE.format(14, 3, 9)))
    joined = "\r".join(SCORE.format(n, 5, 8) for n in (20, 21, 22))
    assert not is_heartbeat((joined,), before=(SCORE.format(14, 3, 9),))
    pct = "scoring:  10%|\u2588         | 30/300 [00:07<01:08,  3.97it/s]"
    assert not is_heartbeat((pct,), before=("scoring:   5%|         | 14/300 [00:03<01:12]",))


def _bar_logs(bars: List[str]) -> Bundle:
    """One process: main waits untimed on an Event, a keep-alive thread sleeps; its log
    (stderr, a file) ends in a bar, redrawn in place (bytes, no new line)."""
    main = (("wait", THREADING), ("fetch", "/job/load.py"), ("<module>", "/job/load.py"))
    keepalive = Thr(
        1,
        stack=(("keepalive", "/job/load.py"), ("run", THREADING)),
        syscall="clock_nanosleep",
        wchan="hrtimer_nanosleep",
        wait_timed=True,
    )
    log = [(2140 + 384 * k, 11, (*CRASH, bar)) for k, bar in enumerate(bars)]
    proc = Proc(30, role="process", stack=main, threads=[keepalive], futex_op=0x80)
    return build([proc], logs={"/job/load.out": log})


def test_a_loading_bar_that_never_moves_is_no_start_up_phase() -> None:
    """``tqdm_stuck_refresh``: "Loading safetensors checkpoint shards" redrawn at 9/20 in every
    sample (a keep-alive refresh: its elapsed time moves), no loader frame, no weights file, no
    CPU: no sign the job still starts - neither "still starting, don't kill it" nor
    progress."""
    bundle = _bar_logs([LOAD.format(9, 8), LOAD.format(9, 12), LOAD.format(9, 12)])
    phases, _ = startup_phases(bundle, extract(bundle))
    assert [p.phase for p in phases] == []
    (growth,) = log_growth(bundle)
    assert growth.grew and growth.heartbeat and not growth.progress
    verdict = classify(bundle)
    assert verdict.state != "progressing" and "still starting" not in verdict.summary


def test_a_loading_bar_that_moves_is_a_start_up_phase() -> None:
    """Contrast: the same bar advancing 9 -> 11 -> 13 of 20 is the loading phase's progress."""
    bundle = _bar_logs([LOAD.format(9, 8), LOAD.format(11, 10), LOAD.format(13, 12)])
    phases, _ = startup_phases(bundle, extract(bundle))
    assert [p.phase for p in phases] == [LOADING]
    assert classify(bundle).state in ("slow", "progressing")


def test_a_bar_left_as_it_was_stays_a_phase_parked_between_steps() -> None:
    """Contrast: the bar not redrawn at all (the log does not grow) is where a start-up that
    paused between two steps left it - the phase stands, as the readiness guard needs."""
    bundle = _bar_logs([LOAD.format(9, 8)] * 3)
    bundle = msgspec.structs.replace(
        bundle,
        samples=tuple(
            msgspec.structs.replace(
                s, logs=tuple(msgspec.structs.replace(lg, size_bytes=2140) for lg in s.logs)
            )
            for s in bundle.samples
        ),
    )
    phases, _ = startup_phases(bundle, extract(bundle))
    assert [p.phase for p in phases] == [LOADING]


def test_a_bar_redrawn_identically_is_judged_as_a_bar_not_an_event() -> None:
    """The log grew by a redraw that left its text as it was (no new line, no new text): the
    bar is compared with itself - unchanged n, a heartbeat - not read as a new event."""
    bar = EPOCH.format(9)
    log = [(1400 + 132 * k, 11, (*CRASH, bar)) for k in range(3)]
    (growth,) = log_growth(build([Proc(30, role="process")], logs={"/job/x.out": log}))
    assert growth.grew and growth.new_lines == (bar,) and growth.heartbeat
