"""A line whose only moving number is a duration growing with the clock counts how long
nothing has come (``diag.verdict.stall_clock``): a heartbeat, not progress."""

from __future__ import annotations

from diag.verdict.progress import is_heartbeat
from diag.verdict.stall_clock import stall_clocks

STALL = [
    "2026-12-06 07:53:44,121 data loader slow: no batch for 20 s",
    "2026-12-06 07:53:49,132 data loader slow: no batch for 25 s",
    "2026-12-06 07:53:54,137 data loader slow: no batch for 30 s",
]


def test_a_duration_growing_with_the_timestamps_is_a_stall_clock() -> None:
    assert stall_clocks(STALL[2:], STALL[:2])
    assert is_heartbeat(tuple(STALL[2:]), tuple(STALL[:2]))


def test_the_first_line_of_a_template_is_news() -> None:
    assert not stall_clocks(STALL[:1], ["2026-12-06 07:53:30,000 step 20 loss 0.88"])


def test_a_duration_that_does_not_follow_the_clock_is_work_reported() -> None:
    saves = [
        "2026-12-06 07:50:00,000 saved checkpoint in 5.2 s",
        "2026-12-06 07:52:00,000 saved checkpoint in 5.4 s",
    ]
    assert not stall_clocks(saves[1:], saves[:1])
    assert not is_heartbeat(tuple(saves[1:]), tuple(saves[:1]))


def test_without_timestamps_three_rising_lines_in_a_row() -> None:
    lines = ["waiting on shard: no data for 5s", "no data for 10s", "no data for 15s"]
    same = ["no data for 5s", "no data for 10s", "no data for 15s"]
    assert stall_clocks(same[2:], same[:2])
    assert not stall_clocks(same[1:2], same[:1])  # two lines: a coincidence is too likely
    assert not stall_clocks(lines[2:], lines[:1])  # another template before it


def test_other_numbers_must_not_move() -> None:
    a = "2026-12-06 07:53:44,121 epoch 3 done in 20 s"
    b = "2026-12-06 07:54:04,121 epoch 4 done in 40 s"
    assert not stall_clocks([b], [a])
