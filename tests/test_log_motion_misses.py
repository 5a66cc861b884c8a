"""Logs and files that move without carrying progress, found on small programs diag had not
seen (``/tmp/explore_log``), with the progress beside each one that must still read so.

- a tqdm bar frozen at n while a monitor thread or a refresher redraws it (its elapsed time
  grows) after a full line (``ready``) was printed below an earlier state of the bar;
"""

from __future__ import annotations

from typing import List, Tuple

from series import SELECTORS, THREADING, Proc, Thr, build

from diag.model import Bundle
from diag.verdict.classify import classify
from diag.verdict.progress import is_heartbeat, log_growth
from diag.verdict.wording import log_moved

BAR = "Epoch 3:  {pct}%|\u2588\u2588\u2588\u2588\u258c     | {n}/100 [00:{s:02d}<00:00, 99.36it/s]"


def _bar(n: int, s: int) -> str:
    return BAR.format(pct=n, n=n, s=s)


def _stuck_bar(bars: List[Tuple[int, int]]) -> Bundle:
    """``tqdm_stuck_epoch`` as captured: the bar's last full line (44/100, ended by the
    ``print("\\nready")``), ``ready``, then the bar redrawn in place - at 45 in every sample
    while its elapsed time grows. Main blocks on a lock; tqdm's monitor thread sleeps timed."""
    log: List[Tuple[int, int, Tuple[str, ...]]] = [
        (657 + 272 * k, 3, (_bar(44, 0), "ready", _bar(n, s))) for k, (n, s) in enumerate(bars)
    ]
    monitor = Thr(
        1,
        stack=(("wait", THREADING), ("run", "/venv/lib/python3.11/site-packages/tqdm/_monitor.py")),
        name="tqdm_monitor",
        wait_timed=True,
    )
    main = (("<module>", "/job/train.py"),)
    proc = Proc(40, role="process", stack=main, threads=[monitor], futex_op=0x80)
    return build([proc], logs={"/job/train.out": log})


def test_a_bar_redrawn_at_the_count_the_first_sample_saw_is_no_progress() -> None:
    """The tail's older part (44/100, ``ready``) is what the first sample already held, not
    lines after its redraw at 45: the bar's state before the new redraw is 45, not 44."""
    bundle = _stuck_bar([(45, 2), (45, 4), (45, 6)])
    (growth,) = log_growth(bundle)
    assert growth.grew and growth.heartbeat and not growth.progress
    assert classify(bundle).state != "progressing"


def test_a_bar_redrawn_at_a_new_count_is_progress() -> None:
    """Contrast: the same log with the bar advancing 45 -> 50 -> 55 of 100."""
    bundle = _stuck_bar([(45, 2), (50, 4), (55, 6)])
    (growth,) = log_growth(bundle)
    assert growth.progress
    assert classify(bundle).state == "progressing"


# --- 2: a status file rewritten in place ----------------------------------------------------

STATUS = '{{"status": "{}", "t": {}}}'
LOOP = (
    ("select", SELECTORS),
    ("_run_once", "/usr/lib/python3.11/asyncio/base_events.py"),
    ("run_forever", "/usr/lib/python3.11/asyncio/base_events.py"),
    ("run_until_complete", "/usr/lib/python3.11/asyncio/base_events.py"),
    ("<module>", "/job/status.py"),
)


def test_a_status_record_with_only_its_unix_time_new_is_a_heartbeat() -> None:
    """JSON's quoted keys report quantities as ``key=value`` does, and a Unix time is a clock
    whatever its key: the record says nothing moved. A step in it that moves is progress."""
    idle = tuple(STATUS.format("idle", t) for t in ("1796231947.733", "1796231949.74"))
    assert is_heartbeat(idle[1:], before=idle[:1])
    assert is_heartbeat(idle[1:])
    ms = tuple(STATUS.format("idle", t) for t in ("1796231947733", "1796231949740"))
    assert is_heartbeat(ms[1:], before=ms[:1])
    step = '{{"status": "train", "step": {}, "t": {}}}'
    moving = (step.format(11, "1796231949.74"), step.format(12, "1796231951.75"))
    assert not is_heartbeat(moving[1:], before=moving[:1])


def _status_job(cpu_pct: float, wchar_per_s: float, wcalls_per_s: float) -> Proc:
    return Proc(
        50,
        role="process",
        cmdline=("python", "status.py"),
        stack=LOOP,
        syscall="epoll_wait",
        wchan="do_epoll_wait",
        wait_timed=True,
        cpu_pct=cpu_pct,
        wchar_per_s=wchar_per_s,
        wcalls_per_s=wcalls_per_s,
    )


def test_a_status_file_rewritten_in_place_is_no_output() -> None:
    """``asyncio_periodic_idle`` followed with ``--log``: 39 B, 38 B (the clock lost a digit:
    truncated, a "rotation"), 39 B - the same record each time, its clock new."""
    tails = [
        STATUS.format("idle", t) for t in ("1796231947.733", "1796231949.74", "1796231951.747")
    ]
    log: List[Tuple[int, int, Tuple[str, ...]]] = [(len(t), 1, (t,)) for t in tails]
    bundle = build([_status_job(0.25, 39 * 2, 2)], logs={"/run/status.json": log})
    (growth,) = log_growth(bundle)
    assert growth.grew and growth.heartbeat and not growth.progress
    assert classify(bundle).state == "idle"


def test_a_timers_small_writes_in_a_job_where_nothing_works_are_no_output() -> None:
    """The same loop with the file not followed: 311 B in 8 writes over 4 s, 0.25% of a core,
    its stack the loop's every time. Nothing computed anything those bytes could report."""
    bundle = build([_status_job(0.25, 39 * 2, 2)])
    verdict = classify(bundle)
    assert verdict.state == "idle", verdict.summary


def test_small_writes_with_cpu_behind_them_are_output() -> None:
    """Contrast (``stdout_progress``): a line per batch of work too brief for a sample to
    catch - 2.8% of a core spent between the writes - is the job's output."""
    bundle = build([_status_job(2.8, 220, 18)])
    assert classify(bundle).state == "progressing"


def test_megabytes_appended_are_output() -> None:
    """Contrast (``file_grows``): results appended and checkpoints written, 3.3 MiB in 4 s,
    from a process whose stack sits in ``time.sleep`` between the writes."""
    bundle = build([_status_job(0.5, 850_000, 7)])
    assert classify(bundle).state == "progressing"


# --- 3: what the sentences say of a bar redrawn in place -------------------------------------


def test_a_bar_redrawn_at_the_same_count_is_said_so() -> None:
    """Not "only repeats a waiting line" (no line is about waiting), nor "grew 0 lines"."""
    verdict = classify(_stuck_bar([(45, 2), (45, 4), (45, 6)]))
    (log,) = [e.detail for e in verdict.evidence if e.signal == "log"]
    assert log == (
        "log train.out only redrew its progress bar at the same count (45/100): not progress"
    )


def test_a_bar_that_advances_by_redraws_alone_says_its_counts() -> None:
    """``tqdm_advancing`` within one long epoch: no new line, the bar's n moves."""
    verdict = classify(_stuck_bar([(45, 2), (50, 4), (55, 6)]))
    assert "log train.out's progress bar went 45/100 -> 55/100 (redrawn in place)" in (
        verdict.summary
    )
    assert "grew 0 lines" not in verdict.summary


def test_a_last_line_rewritten_without_a_bar_diag_reads_is_said_so() -> None:
    """SGLang's ``50% Completed | 4/8`` bar (its own bar_format) or a line still being
    written: no new line, no count diag reads - the line was rewritten, not "0 lines"."""
    assert log_moved("serve.log", 0, 225, ()) == (
        "log serve.log rewrote its last line in place (225 B, no new line)"
    )
    assert log_moved("serve.log", 4, 160, ()) == "log serve.log grew 4 lines (160 B)"
