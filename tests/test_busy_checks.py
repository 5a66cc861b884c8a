"""A loop that asks the same cheap question in every sample is polling, not computing.

``while not os.path.exists(flag): pass`` on a rank whose peer waits in a barrier showed the
rank "CPU-bound in `exists` (95% of a core) ... one long call - wait, don't kill": a stat has
nothing to compute for seconds, so in every sample it is the loop asking again
(``polling._CHECKS``). Recorded on a real 2-rank gloo job (``explore_spin_on_exists``), beside
the same bug with a sleep in the loop and a rank that really computes in pure Python.
"""

from __future__ import annotations

from pathlib import Path

from diag.bundle.io import load_bundle
from diag.commands.judge import judge
from diag.model import Frame
from diag.verdict.polling import frame_marker

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"


def test_a_rank_spinning_on_a_file_check_is_deadlocked_with_its_peer() -> None:
    v = judge(load_bundle(BUNDLES / "explore_spin_on_exists.json"))
    assert (v.state, v.rule) == ("deadlocked", "peers_wait"), v.summary
    assert "rank 1 spins a core asking the same thing again and again" in v.summary
    assert "wait, don't kill" not in v.summary
    assert [s.rank for s in v.suspects][:1] == [1]


def test_the_same_loop_with_a_sleep_stays_deadlocked() -> None:
    v = judge(load_bundle(BUNDLES / "explore_poll_exists_with_sleep.json"))
    assert (v.state, v.rule) == ("deadlocked", "peers_wait"), v.summary
    assert "no CPU, I/O or log progress" in v.summary


def test_a_rank_computing_in_python_stays_slow() -> None:
    v = judge(load_bundle(BUNDLES / "explore_python_straggler.json"))
    assert (v.state, v.rule) == ("slow", "works_silently"), v.summary
    assert "wait, don't kill" in v.summary


def test_check_frames_are_markers_only_in_their_own_modules() -> None:
    def frame(name: str, filename: str) -> Frame:
        return Frame(name=name, filename=filename, line=1)

    assert frame_marker(frame("exists", "<frozen genericpath>")) == "check"
    assert frame_marker(frame("isfile", "/usr/lib/python3.12/genericpath.py")) == "check"
    assert frame_marker(frame("Event.is_set", "/usr/lib/python3.11/threading.py")) == "check"
    assert frame_marker(frame("Queue.empty", "/usr/lib/python3.11/queue.py")) == "check"
    # The job's own function named like a check is its own code: it may compute.
    assert frame_marker(frame("exists", "/job/cache.py")) is None


def test_a_yield_loop_caught_on_either_of_its_lines_is_still_a_poll() -> None:
    """The shm_yield_engine_idle scenario under load: the engine's loop was caught on its
    ``if slot.value == 0`` line once and on its ``os.sched_yield()`` line after - the same
    stack but for the innermost line. It read "slow: CPU-bound in `engine`"; it polls."""
    v = judge(load_bundle(BUNDLES / "explore_shm_yield_two_lines.json"))
    assert (v.state, v.rule) == ("idle", "waits_for_outside"), v.summary
    assert "busy-polls with nothing to receive" in v.summary
