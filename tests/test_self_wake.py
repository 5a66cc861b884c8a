"""A process only its own code can wake, whose wakes only say it lives (#34, miss 7): the
parsers of who can wake an event loop (an epoll interest list, SigCgt), a heartbeat whose
beat number moves, and the recorded captures of the scenario and its contrasts."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import msgspec

from diag.bundle.io import load_bundle
from diag.model import Bundle, ThreadSample
from diag.probes.fd_ends import blocked_fds
from diag.probes.loop_wakers import epoll_fd, parse_epoll_fdinfo, parse_sig_caught
from diag.verdict.classify import classify
from diag.verdict.progress import is_heartbeat

BUNDLES = Path(__file__).resolve().parent.parent / "samples" / "bundles"

FDINFO = (
    "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1039\n"
    "tfd:        5 events:       19 data:                5  pos:0 ino:1319f1 sdev:9\n"
    "tfd:        9 events:       19 data:                9  pos:0 ino:1319f4 sdev:9\n"
)


def test_an_epoll_interest_list_is_read_from_its_fdinfo() -> None:
    assert parse_epoll_fdinfo(FDINFO) == ((5, 9), 0)
    assert parse_epoll_fdinfo(FDINFO, cap=1) == ((5,), 1)
    assert parse_epoll_fdinfo("pos:\t0\nflags:\t02\n") == ((), 0)
    # a text cut mid-line by the read cap counts only its whole lines
    assert parse_epoll_fdinfo(FDINFO + "tfd:   ") == ((5, 9), 0)


def test_the_epoll_fd_is_argument_zero_of_an_epoll_wait_only() -> None:
    assert epoll_fd("epoll_wait", "232 0x3 0x7ffd 0x1 0x1f4 0x0 0x0 0x7ffd 0x7f") == 3
    assert epoll_fd("read", "0 0x3 0x7ffd 0x1 0x0 0x0 0x0 0x7ffd 0x7f") is None
    assert epoll_fd("epoll_wait", "232") is None


def test_caught_signals_are_read_from_sigcgt() -> None:
    assert parse_sig_caught("Name:\tpython\nSigCgt:\t0000000000000002\n") == (2,)
    assert parse_sig_caught("x\nSigCgt:\t0000000000004002\n") == (2, 15)
    assert parse_sig_caught("Name:\tpython\n") is None


def test_a_loops_watched_fds_are_looked_up_like_blocked_ones() -> None:
    main = ThreadSample(tid=1, syscall="epoll_wait", watched_fds=(5, 7))
    reader = ThreadSample(tid=2, syscall="read", syscall_fd=7)
    assert blocked_fds([reader, main]) == [7, 5]
    # a list past the cap is a server's: not looked up socket by socket
    assert blocked_fds([ThreadSample(tid=1, watched_fds=(5,), watched_more=3)]) == []


def test_a_beat_number_on_a_liveness_line_is_a_heartbeat_a_step_is_not() -> None:
    assert is_heartbeat(("07:17:44 alive beat=10", "07:17:44 alive beat=11"))
    assert is_heartbeat(("alive beat=12",), ("alive beat=11",))
    assert is_heartbeat(('{"event": "heartbeat", "seq": 41}', '{"event": "heartbeat", "seq": 42}'))
    assert not is_heartbeat(("step=5 done", "step=6 done"))
    # a liveness line whose count jumps reports work, not its own lines
    assert not is_heartbeat(("worker alive, served=10", "worker alive, served=14"))
    # a stats report is judged by its values, liveness words or not
    assert not is_heartbeat(
        ("healthy running: 3 reqs queue: 1", "healthy running: 4 reqs queue: 1")
    )


def _with_main(bundle: Bundle, change: Callable[[ThreadSample], ThreadSample]) -> Bundle:
    """The bundle with ``change`` applied to every sample's main thread."""
    samples = []
    for sample in bundle.samples:
        procs = []
        for ps in sample.processes:
            threads = tuple(change(t) if t.tid == ps.pid else t for t in ps.threads)
            procs.append(msgspec.structs.replace(ps, threads=threads))
        samples.append(msgspec.structs.replace(sample, processes=tuple(procs)))
    return msgspec.structs.replace(bundle, samples=tuple(samples))


def test_the_loop_that_wakes_only_itself_is_deadlocked_and_its_contrasts_are_not() -> None:
    stuck = load_bundle(BUNDLES / "asyncio_event_heartbeat.json")
    verdict = classify(stuck)
    assert verdict.state == "deadlocked" and verdict.rule == "wakes_only_itself"
    assert "only its own wake-up pipe" in verdict.summary
    assert verdict.suspects and verdict.suspects[0].pid == stuck.processes[0].pid
    daemon = classify(load_bundle(BUNDLES / "asyncio_heartbeat_until_signal.json"))
    assert daemon.state == "idle"
    # the same capture, but a SIGTERM handler (a signal can set it), or an fd it watches
    # that is no wake-up pipe of its own (a socket, a pipe from elsewhere): a door
    changes = (
        {"signals_caught": (2, 15)},
        {"watched_fds": (5, 0)},
        {"watched_fds": None},
    )
    for change in changes:
        changed = _with_main(stuck, lambda t, c=change: msgspec.structs.replace(t, **c))
        assert classify(changed).state == "idle", change


def test_a_loop_only_its_timers_wake_that_logs_nothing_is_idle_with_what_would_tell() -> None:
    """The same capture without its liveness lines: its timer may poll a file or a clock -
    idle, saying that only its own timers can wake it and what would tell."""
    stuck = load_bundle(BUNDLES / "asyncio_event_heartbeat.json")
    samples = tuple(msgspec.structs.replace(x, logs=()) for x in stuck.samples)
    verdict = classify(msgspec.structs.replace(stuck, samples=samples))
    assert verdict.state == "idle" and verdict.rule == "waits_for_outside"
    assert "nothing but its own timers can wake" in verdict.summary


def test_a_process_holding_a_connection_is_not_one_only_itself_can_wake() -> None:
    """A socket beyond its wake-up pair (a client idle between two calls to a server): whoever
    is at the other end may write to it - no wakes_only_itself."""
    stuck = load_bundle(BUNDLES / "asyncio_event_heartbeat.json")
    samples = tuple(
        msgspec.structs.replace(
            x,
            processes=tuple(
                msgspec.structs.replace(ps, socket_fds=(ps.socket_fds or 0) + 1)
                for ps in x.processes
            ),
        )
        for x in stuck.samples
    )
    verdict = classify(msgspec.structs.replace(stuck, samples=samples))
    assert verdict.rule != "wakes_only_itself"


def test_a_timer_whose_lines_say_what_it_polls_for_is_no_liveness_beat() -> None:
    """An eval job polling a checkpoint directory every second, logging 'waiting for a new
    checkpoint in DIR' (samples/scenarios/checkpoint_poller.py): its own timer, no port, one
    repeated line - but the line names what it polls for, something diag cannot watch: idle,
    where the same shape with "alive beat=N" lines is deadlocked."""
    v = classify(load_bundle(BUNDLES / "checkpoint_poller.json"))
    assert v.state == "idle" and v.rule != "wakes_only_itself", v.summary
    beat = classify(load_bundle(BUNDLES / "asyncio_event_heartbeat.json"))
    assert beat.state == "deadlocked", beat.summary


def test_a_daemon_whose_only_thread_sleeps_on_its_timer_and_beats_is_idle() -> None:
    """A one-thread daemon checking for a flag file every second and logging ``alive
    tick=N`` (samples/scenarios/flag_file_daemon.py): closed to the outside like the heartbeat
    cases, but nothing of it waits on its own code - its only thread sleeps on its timer, each
    wake is the poll. Idle, said so; the same beat beside a main thread blocked untimed on an
    Event (thread_event_heartbeat) stays deadlocked."""
    daemon = load_bundle(BUNDLES / "flag_file_daemon.json")
    v = classify(daemon)
    assert v.state == "idle" and v.rule == "waits_for_outside", v.summary
    assert "none of its threads waits on its own code" in v.summary
    stuck = classify(load_bundle(BUNDLES / "thread_event_heartbeat.json"))
    assert stuck.state == "deadlocked" and stuck.rule == "wakes_only_itself", stuck.summary
    # the daemon's main thread blocked untimed on a lock of its own instead: stuck
    untimed = {"syscall": "futex", "futex_op": 0x189, "wait_timed": False, "state": "S"}
    changed = _with_main(daemon, lambda t: msgspec.structs.replace(t, **untimed))
    assert classify(changed).state == "deadlocked"


def test_a_main_thread_joining_its_polling_thread_is_no_waiter() -> None:
    """The same daemon's loop in a thread the main thread joins
    (samples/scenarios/flag_file_daemon_thread.py): the join waits for a live thread of its
    own, the one that wakes - idle. Were that thread blocked untimed on a lock or event of its
    own instead, nothing would end the wait: deadlocked."""
    joined = load_bundle(BUNDLES / "flag_file_daemon_thread.json")
    v = classify(joined)
    assert v.state == "idle" and v.rule == "waits_for_outside", v.summary
    blocked = {"syscall": "futex", "futex_op": 0x189, "wait_timed": False, "state": "S"}
    samples = []
    for sample in joined.samples:
        procs = []
        for ps in sample.processes:
            threads = tuple(
                t if t.tid == ps.pid else msgspec.structs.replace(t, **blocked) for t in ps.threads
            )
            procs.append(msgspec.structs.replace(ps, threads=threads))
        samples.append(msgspec.structs.replace(sample, processes=tuple(procs)))
    stuck = classify(msgspec.structs.replace(joined, samples=tuple(samples)))
    assert stuck.state == "deadlocked", stuck.summary
