"""Logs and files that move without carrying progress, found on small programs diag had not
seen (``/tmp/explore_log``), with the progress beside each one that must still read so.

- a tqdm bar frozen at n while a monitor thread or a refresher redraws it (its elapsed time
  grows) after a full line (``ready``) was printed below an earlier state of the bar;
"""

from __future__ import annotations

from typing import List, Tuple

from series import THREADING, Proc, Thr, build

from diag.model import Bundle
from diag.verdict.classify import classify
from diag.verdict.progress import log_growth

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
