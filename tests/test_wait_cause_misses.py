"""Waits read by their cause, on programs recorded in samples/bundles as ``explore_*``: who waits
on whom, and who can end each wait - not what the kernel state alone suggests.

- ``bounded_queue_self_put``: the main thread fills a ``queue.Queue(maxsize=2)`` it was meant
  to drain itself and blocks in ``put``; a heartbeat thread logs every second. Read as "a timer
  may end the wait": "idle". The heartbeat woke four times and the put never woke - no ``get``
  freed a slot: deadlocked. Beside it, a heartbeat that takes an item every 3 s
  (``bounded_queue_consumer``), a consumer that sleeps 10 s per item
  (``bounded_queue_slow_consumer``) and one retrying its upload with a sleep
  (``bounded_queue_retry_consumer``) must never read deadlocked.
- ``signal_pause`` / ``signal_sigwait``: a supervisor parked in ``signal.pause()`` read "it
  wakes on a timer", one in ``signal.sigwait`` read "deadlocked, nothing can wake it": both
  wait for a signal - idle, said so.
- ``filelock_holder``: process B polls ``filelock.FileLock.acquire`` while A of the same job
  holds it; ``flock_blocking``: B blocked in ``flock`` on A's lock. The verdict names A.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import msgspec
import pytest
from conftest import REPO, run_diag, start_ready
from recorded_variants import Json, explore_json, load_variant, threads_of
from series import Proc, build

from diag.bundle.io import load_bundle
from diag.frames import polled_lock
from diag.model import FileLock, Frame, ThreadSample
from diag.verdict.classify import classify
from diag.verdict.features import extract
from diag.verdict.file_locks import lock_waits
from diag.verdict.self_wait import undrained_puts
from diag.verdict.thread_wait import signal_wait

BUNDLES = REPO / "samples" / "bundles"


_json = explore_json
_load = load_variant
_threads = threads_of


# --- 1. a put on a full queue no thread drains ---------------------------------------------


def test_a_put_on_a_full_queue_beside_a_heartbeat_is_deadlocked() -> None:
    bundle = load_bundle(BUNDLES / "explore_bounded_queue_self_put.json")
    v = classify(bundle)
    assert (v.state, v.rule) == ("deadlocked", "waits_on_itself"), v.summary
    assert [s.pid for s in v.suspects] == [bundle.target.root_pid]
    assert "`Queue.put`" in v.summary and "`produce_all`" in v.summary
    assert "`heartbeat`" in v.summary and "queue.Full" in v.summary


def test_a_put_that_woke_or_a_heartbeat_that_did_not_cycle_is_no_undrained_put(
    tmp_path: Path,
) -> None:
    """The proof is two counters: the putter never woke, the other thread woke twice or
    more. Either one otherwise and a ``get`` may have freed a slot - or may yet."""
    data = _json("bounded_queue_self_put")
    pid = data["target"]["root_pid"]
    assert undrained_puts(_load(data, tmp_path), extract(_load(data, tmp_path)))
    woke = _json("bounded_queue_self_put")
    for i, t in enumerate(_threads(woke, pid)):
        t["voluntary_ctxt_switches"] += i
    bundle = _load(woke, tmp_path)
    assert undrained_puts(bundle, extract(bundle)) == []
    assert classify(bundle).state != "deadlocked"
    quiet = _json("bounded_queue_self_put")
    heartbeat = None
    for sample in quiet["samples"]:
        for ps in sample["processes"]:
            for t in ps["threads"]:
                if t["tid"] != pid:
                    heartbeat = t["tid"]
                    t["voluntary_ctxt_switches"] = 7  # never woke during the capture
    assert heartbeat is not None
    bundle = _load(quiet, tmp_path)
    assert undrained_puts(bundle, extract(bundle)) == []


def test_a_queue_some_thread_drains_is_never_deadlocked() -> None:
    """A heartbeat that takes an item every 3 s, a consumer asleep 10 s per item, and one
    that took an item and retries its upload every 0.5 s for ever (it woke eight times, the
    put never: but it sleeps in ``upload`` under its loop, not in its own loop - it drains
    the queue once that returns; its wait is the service's, "stuck if what it polls for
    never comes")."""
    names = (
        "bounded_queue_consumer",
        "bounded_queue_slow_consumer",
        "bounded_queue_retry_consumer",
    )
    for name in names:
        bundle = load_bundle(BUNDLES / f"explore_{name}.json")
        assert undrained_puts(bundle, extract(bundle)) == [], name
        v = classify(bundle)
        assert v.state in ("idle", "progressing", "slow"), (name, v.summary)


# --- 2. a wait for a signal --------------------------------------------------------------


def test_signal_pause_and_sigwait_wait_for_a_signal_not_a_timer() -> None:
    for name in ("signal_pause", "signal_sigwait"):
        v = classify(load_bundle(BUNDLES / f"explore_{name}.json"))
        assert (v.state, v.rule) == ("idle", "waits_for_outside"), (name, v.summary)
        assert "waits for a signal" in v.summary and "wakes on a timer" not in v.summary, v.summary
        assert "SigCgt" in v.summary


@pytest.mark.parametrize(
    "wchan,syscall",
    [("__do_sys_pause", "pause"), ("sigsuspend", "nr_130"), ("do_sigtimedwait.isra.0", "nr_128"),
     ("do_sigtimedwait", None), ("0", "pause")],
)  # fmt: skip
def test_each_signal_syscall_is_a_wait_for_a_signal(wchan: str, syscall: Optional[str]) -> None:
    t = ThreadSample(tid=7, state="S", wchan=wchan, syscall=syscall)
    assert signal_wait(t)
    sup = Proc(pid=700, role="process", stack=[("<module>", "/job/supervisor.py")], wchan=wchan,
               syscall=syscall)  # fmt: skip
    v = classify(build([sup], n=3))
    assert (v.state, v.rule) == ("idle", "waits_for_outside"), v.summary
    assert "pid 700 waits for a signal" in v.summary


def test_a_timer_beside_a_signal_wait_keeps_the_timer_words() -> None:
    """A process waiting for a signal while another sleeps on a timer: "waits for a signal"
    would hide the poll that may be what ends it."""
    assert not signal_wait(ThreadSample(tid=7, state="S", wchan="hrtimer_nanosleep"))
    sup = Proc(pid=700, role="process", stack=[("<module>", "/job/supervisor.py")],
               wchan="__do_sys_pause", syscall="pause")  # fmt: skip
    poller = Proc(pid=701, role="process", stack=[("poll", "/job/poller.py")],
                  wchan="hrtimer_nanosleep", syscall="clock_nanosleep",
                  wait_timed=True)  # fmt: skip
    v = classify(build([sup, poller], n=3))
    assert v.state == "idle" and "wakes on a timer" in v.summary, v.summary


# --- 3. a file lock another process of the job holds -----------------------------------------


def test_a_polling_acquirer_is_a_file_lock_wait_and_says_how_to_find_the_holder() -> None:
    """No waiter line in /proc/locks (a poller sleeps between ``flock(LOCK_NB)`` tries), and
    the collector reads /proc/locks only for a blocked waiter: the holder is not in the
    bundle, so the verdict names the wait and ``lslocks`` - not "it wakes on a timer". No
    "unknown" either: it waits on a process of the job asleep on its timer (the graph's idle).
    """
    bundle = load_bundle(BUNDLES / "explore_filelock_holder.json")
    waits = lock_waits(bundle, extract(bundle))
    assert [w.polled for w in waits] == ["BaseFileLock.acquire"]
    v = classify(bundle)
    assert (v.state, v.rule) == ("idle", "waits_for_outside"), v.summary
    assert "polls to take a file lock" in v.summary and "lslocks" in v.summary
    assert "wakes on a timer" not in v.summary


def test_a_polling_acquirer_names_the_holder_of_the_job_proc_locks_lists() -> None:
    bundle = load_bundle(BUNDLES / "explore_filelock_holder.json")
    procs = {p.info.cmdline[-1]: p.info.pid for p in extract(bundle) if p.info.cmdline}
    holder = next(pid for code, pid in procs.items() if "lk.acquire()" in code)
    held = FileLock(pid=holder, ordinal=1, blocked=False, kind="flock", dev="fe:00", inode=9,
                    name="python", state="S")  # fmt: skip
    samples = list(bundle.samples)
    samples[-1] = msgspec.structs.replace(samples[-1], file_locks=(held,))
    v = classify(msgspec.structs.replace(bundle, samples=tuple(samples)))
    assert (v.state, v.rule) == ("idle", "waits_for_outside"), v.summary
    assert [s.pid for s in v.suspects] == [holder]
    assert f"pid {holder} `python`, of this job, holds it" in v.summary


def test_a_blocked_flock_on_a_lock_held_in_the_job_names_the_holder() -> None:
    bundle = load_bundle(BUNDLES / "explore_flock_blocking.json")
    holder = next(lk.pid for s in bundle.samples for lk in s.file_locks if not lk.blocked)
    v = classify(bundle)
    assert (v.state, v.rule) == ("idle", "waits_for_outside"), v.summary
    assert [s.pid for s in v.suspects] == [holder]
    assert "`/tmp/explore_wait/fb.lock`" in v.summary and "of this job, holds it" in v.summary


def test_polled_lock_frames() -> None:
    site = "/venv/lib/python3.11/site-packages/"
    stack = [
        Frame(name="LockAcquisition._poll_until_acquired", filename=site + "filelock/_core/a.py"),
        Frame(name="BaseFileLock.acquire", filename=site + "filelock/_core/_lock.py"),
        Frame(name="main", filename="/job/train.py"),
    ]
    assert polled_lock(stack) == "BaseFileLock.acquire"
    assert polled_lock([Frame(name="acquire", filename="/job/mylock.py")]) == ""


# --- real processes --------------------------------------------------------------------------

SELF_PUT = """
import queue, sys, threading, time
q = queue.Queue(maxsize=2)
def heartbeat():
    while True:
        time.sleep(0.2)
        sys.stderr.write("tick\\n")
threading.Thread(target=heartbeat, name="heartbeat", daemon=True).start()
def fill(n):
    for i in range(n):
        q.put(i)
print("READY", flush=True)
fill(10)
"""
PAUSE = """
import signal
print("READY", flush=True)
while True:
    signal.pause()
"""


def _verdict(code: str, tmp_path: Path) -> Json:
    started = start_ready([sys.executable, "-c", code], timeout_s=30)
    try:
        time.sleep(0.5)  # in the wait, not just before it
        out = tmp_path / "bundle.json"
        args = ["capture", "--pid", str(started.pid), "--count", "3", "--interval", "1"]
        done = run_diag([*args, "-o", str(out)])
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    verdict: Json = json.loads(out.read_text())["verdict"]
    return verdict


@pytest.mark.slow
def test_real_put_on_a_full_queue_beside_a_heartbeat_is_deadlocked(tmp_path: Path) -> None:
    v = _verdict(SELF_PUT, tmp_path)
    assert (v["state"], v["rule"]) == ("deadlocked", "waits_on_itself"), v["summary"]
    assert "`Queue.put`" in v["summary"] and "`fill`" in v["summary"]


@pytest.mark.slow
def test_real_signal_pause_waits_for_a_signal(tmp_path: Path) -> None:
    v = _verdict(PAUSE, tmp_path)
    assert (v["state"], v["rule"]) == ("idle", "waits_for_outside"), v["summary"]
    assert "waits for a signal" in v["summary"]


FILELOCK = """
import os, subprocess, sys, tempfile, time
path = os.path.join(tempfile.mkdtemp(), "x.lock")
hold = f"import time\\nfrom filelock import FileLock\\nlk = FileLock({path!r})\\nlk.acquire()\\n"
hold += "print('held', flush=True)\\ntime.sleep(3600)"
take = f"from filelock import FileLock\\nwith FileLock({path!r}):\\n    pass"
a = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
a.stdout.readline()
b = subprocess.Popen([sys.executable, "-c", take])
time.sleep(0.5)
print("READY", flush=True)
b.wait()
"""


@pytest.mark.slow
def test_real_filelock_poller_names_the_holder_in_the_job(tmp_path: Path) -> None:
    """``filelock`` polls (flock with LOCK_NB, a sleep, again): no waiter line in /proc/locks.
    The collector reads it anyway when a thread's stack is in such a loop, keeping the locks
    the job's processes hold - and the verdict names the holder, not only "lslocks"."""
    pytest.importorskip("filelock")  # torch's dependency: installed by `make install`
    v = _verdict(FILELOCK, tmp_path)
    assert (v["state"], v["rule"]) == ("idle", "waits_for_outside"), v["summary"]
    assert "polls to take a file lock in `BaseFileLock.acquire`" in v["summary"], v["summary"]
    assert "of this job, holds it" in v["summary"], v["summary"]
    assert len(v.get("suspects", ())) == 1, v["summary"]
