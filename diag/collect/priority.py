"""Win the CPU for a sampling burst, and only for it: diag's scheduling priority (issue 27).

Why: diag is run when a host looks wrong, and such a host often has every core busy
(busy-polling schedulers, a spinning shared-memory wait, DataLoader workers, a compile). At
the normal priority a sample's reads wait behind every CPU-bound task, so samples stretch and
their timestamps spread unevenly. A sample is a short burst - milliseconds of CPU per rank -
so diag raises its priority when a burst starts and puts it back when the burst ends, every
burst; between samples (sleeping, judging, writing) it runs as it was started.

What it does (``rr``, the default, chosen by ``bench/saturation.py``):

* The forked shard workers, which do the per-process reads, run ``SCHED_RR`` at the lowest
  real-time priority (``RR_PRIORITY``), with ``SCHED_RESET_ON_FORK`` (a py-spy they start runs
  at the normal priority). Measured beside 8 CPU hogs on 2 cores: a 4-rank sample took ~0.04 s
  this way, ~0.14 s at the normal priority - and the same ~0.14 s at nice -10: with the
  kernel's autogroups (a session each) or cgroups, a nice value only orders the threads of one
  group, and the busy processes of a host are rarely in diag's.
* Every thread of diag itself gets nice ``BOOST_NICE`` (-10): it helps where diag and the
  busy work share a group, and a fair scheduler still gives every task its share, so it
  cannot starve anything. (``nice``: only this, for the workers too.)
* With real-time workers, diag's own threads - the coordinator: it posts the work, reads
  the answers, runs the socket, log and GPU probes - run ``SCHED_RR`` one priority above
  them (``COORDINATOR_PRIORITY``), with ``SCHED_RESET_ON_FORK``, from just before the
  workers are forked or woken until the burst ends. Why: at the normal priority they got no
  CPU from the moment the workers were woken until the workers were done - on 2 cores the
  8-rank first sample's timeline showed diag's thread off the CPU from ~6 ms to ~38 ms,
  then ~10-14 ms of its own work alone (discovery, decoding the answers, the probes) while a
  core stood idle. One priority above, it preempts a worker whenever it has something to
  do and sleeps otherwise, so its work overlaps theirs (``bench/snapshot.py``). Its bound:
  ``RLIMIT_RTTIME`` too (``RT_SOFT_S``; no hard kill - diag itself must not be killed, so
  where a hard bound is already set for diag its threads stay out of real time),
  whose ``SIGXCPU`` (``demote_all``) puts every thread of diag back to ``SCHED_OTHER`` for
  the rest of the burst. Only the main thread takes signals in Python, so a Collector
  running on another thread keeps diag's threads out of real time. A thread started during
  the burst, and every process diag starts (the NVML worker, a py-spy), starts at the
  normal policy and nice 0 (the Collector starts its probes' threads before the burst).

Why real-time workers cannot starve the job: a worker's burst is bounded three ways. The kernel
enforces ``RLIMIT_RTTIME`` - real-time CPU without sleeping: ``SIGXCPU`` after ``RT_SOFT_S``,
whose handler (``demote_self``) drops the worker back to ``SCHED_OTHER``, and a kill at
``RT_HARD_S`` (the pool then does the rest in this process, unboosted). Nothing a worker does
waits on the target or loops without a bound (the stack reader's walks have budgets and
cycle checks), and every job ends in a blocking read of the next ticket. And the burst ends
when the sample does: the workers are put back to ``SCHED_OTHER`` whether or not it succeeded.
The kernel's real-time throttling (95 % of each second by default) stays as a last guard.

Without the privilege (``CAP_SYS_NICE``, or ``RLIMIT_RTPRIO``/``RLIMIT_NICE`` allowing it)
each refusal falls back silently - real-time to nice, nice to nothing, remembered so later
bursts do not ask again: nothing in a capture depends on the boost. A diag the user started
niced (nice > 0) is left as it is: that was asked for. ``--no-boost`` (``DIAG_NO_BOOST=1``)
turns it off; ``DIAG_BOOST_POLICY=nice`` keeps the workers out of real time.
"""

from __future__ import annotations

import os
import resource
import signal
import threading
from types import TracebackType
from typing import Any, Dict, List, Literal, Mapping, Optional, Sequence, Set, Tuple, Type

BoostPolicy = Literal["nice", "rr", "off"]
POLICIES: tuple[BoostPolicy, ...] = ("nice", "rr", "off")
BOOST_NICE = -10
RR_PRIORITY = 1  # the lowest real-time priority: above every SCHED_OTHER task, below all RT
COORDINATOR_PRIORITY = RR_PRIORITY + 1  # diag's own threads, so they preempt its workers
RT_SOFT_S = 0.2  # real-time CPU without blocking: SIGXCPU, the worker drops to SCHED_OTHER
RT_HARD_S = 1.0  # the kernel kills the worker (the pool does its share in this process)


def policy_from_env(env: Optional[Mapping[str, str]] = None) -> BoostPolicy:
    """``DIAG_NO_BOOST`` (any non-empty value but 0) turns the boost off - how ``--no-boost``
    reaches every collector of a run, Slurm nodes included; ``DIAG_BOOST_POLICY`` picks it."""
    env = os.environ if env is None else env
    if env.get("DIAG_NO_BOOST", "") not in ("", "0"):
        return "off"
    wanted = env.get("DIAG_BOOST_POLICY", "rr")
    for policy in POLICIES:
        if wanted == policy:
            return policy
    return "rr"


def _own_tids() -> List[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        return [os.getpid()]


def _set_nice(tid: int, value: int) -> None:
    """One thread's nice value (on Linux ``PRIO_PROCESS`` with a TID is that thread alone)."""
    os.setpriority(os.PRIO_PROCESS, tid, value)


def demote_all(_signum: int = 0, _frame: object = None) -> None:
    """The coordinator's ``SIGXCPU`` handler: a thread of diag ran its real-time bound out,
    so every thread of diag goes back to the normal policy (which one ran out is not told)."""
    for tid in _own_tids():
        try:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            pass


def demote_self(_signum: int = 0, _frame: object = None) -> None:
    """A worker's ``SIGXCPU`` handler: its real-time time bound ran out, back to normal."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except OSError:
        pass


class Burst:
    """One raised burst: what was changed, so ``restore`` can put back exactly that."""

    def __init__(self, boost: Boost, base_nice: int) -> None:
        self._boost = boost
        self.base_nice = base_nice
        self.raised = False
        self._saved: Dict[int, int] = {}  # own tid -> its nice before the burst
        self._workers: Set[int] = set()
        self._helpers: Set[int] = set()
        self.rt_workers = 0  # workers put in real time this burst
        self.coordinating = False  # diag's own threads in real time (``raise_coordinator``)
        # What ``raise_coordinator`` replaced: the SIGXCPU handler and RLIMIT_RTTIME.
        self._rt_saved: Optional[Tuple[Any, Tuple[int, int]]] = None

    @property
    def label(self) -> str:
        """What this burst ran at, for ``Sample.boost``: "rr", "nice" or "" (normal)."""
        if not self.raised:
            return ""
        return "rr" if self.rt_workers else "nice"

    def raise_own(self) -> bool:
        target = min(self.base_nice, BOOST_NICE)
        for tid in _own_tids():
            try:
                self._saved[tid] = os.getpriority(os.PRIO_PROCESS, tid)
                _set_nice(tid, target)
            except PermissionError:
                return False
            except OSError:
                continue  # the thread ended meanwhile
        self.raised = True
        return True

    def raise_coordinator(self) -> None:
        """diag's own threads (those ``raise_own`` raised) one real-time priority above its
        workers: called when workers will be used (the Collector, before forking them) and
        when the first is made real-time (without workers - one process to read - the
        threads keep the nice value, which a thread they start inherits), bounded by
        ``RLIMIT_RTTIME`` whose ``SIGXCPU`` demotes them all (the module docstring says why).
        Only from the main thread, the one Python delivers signals to: elsewhere the bound
        could not act, so the threads stay at their nice value."""
        if self.coordinating or not self.raised:
            return
        if self._boost.policy != "rr" or self._boost.rt_denied is not None:
            return
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            limit = resource.getrlimit(resource.RLIMIT_RTTIME)
        except (OSError, ValueError):
            return
        if limit[1] != resource.RLIM_INFINITY:
            return  # a hard bound set for diag would kill it (SIGKILL), not demote it
        try:
            handler = signal.signal(signal.SIGXCPU, demote_all)
        except (OSError, ValueError):
            return
        self._rt_saved = (handler if handler is not None else signal.SIG_DFL, limit)
        try:
            resource.setrlimit(resource.RLIMIT_RTTIME, (int(RT_SOFT_S * 1e6), limit[1]))
        except (OSError, ValueError):
            self._put_back_bound()
            return
        policy = os.SCHED_RR | os.SCHED_RESET_ON_FORK
        for tid in self._saved:
            try:
                os.sched_setscheduler(tid, policy, os.sched_param(COORDINATOR_PRIORITY))
                self.coordinating = True
            except PermissionError:
                self._boost.rt_denied = "no privilege for real time (CAP_SYS_NICE)"
                break
            except OSError:
                continue  # the thread ended meanwhile
        if not self.coordinating:
            self._put_back_bound()

    def _put_back_bound(self) -> None:
        if self._rt_saved is None:
            return
        handler, limit = self._rt_saved
        self._rt_saved = None
        try:
            resource.setrlimit(resource.RLIMIT_RTTIME, limit)
        except (OSError, ValueError):
            pass
        signal.signal(signal.SIGXCPU, handler)

    def add_workers(self, pids: Sequence[int]) -> None:
        """Raise forked workers too (those forked during the burst already inherited the
        nice value of the thread that forked them; a real-time policy is set here)."""
        if not self.raised:
            return
        for pid in pids:
            if pid in self._workers:
                continue
            self._workers.add(pid)
            if self._boost.policy == "rr" and self._boost.rt_denied is None:
                try:
                    self._boost.bound_rt(pid)
                    policy = os.SCHED_RR | os.SCHED_RESET_ON_FORK
                    os.sched_setscheduler(pid, policy, os.sched_param(RR_PRIORITY))
                    self.rt_workers += 1
                    self.raise_coordinator()
                    continue
                except PermissionError:
                    self._boost.rt_denied = "no privilege for real time (CAP_SYS_NICE)"
                except OSError:
                    continue  # the worker is gone
            try:
                _set_nice(pid, min(self.base_nice, BOOST_NICE))
            except OSError:
                pass  # gone, or refused: that worker runs at the normal priority

    def add_helpers(self, pids: Sequence[Optional[int]]) -> None:
        """Long-lived helper processes (the NVML worker): nice for the burst, like diag's own
        threads, and put back after it (one started during the burst inherited the raise)."""
        if not self.raised:
            return
        for pid in pids:
            if pid is None or pid in self._helpers:
                continue
            try:
                _set_nice(pid, min(self.base_nice, BOOST_NICE))
                self._helpers.add(pid)
            except OSError:
                pass

    def restore(self) -> None:
        """Every thread of this process - also those started during the burst, which
        inherited its priority - and every worker back to the priority before it."""
        if not self.raised:
            return
        for tid in _own_tids():
            try:
                if self.coordinating:
                    os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
                _set_nice(tid, self._saved.get(tid, self.base_nice))
            except OSError:
                pass
        self.coordinating = False
        self._put_back_bound()
        for pid in self._helpers:
            if not _my_child(pid):
                continue  # gone, its pid maybe reused: never touch another process
            try:
                _set_nice(pid, self.base_nice)
            except OSError:
                pass
        for pid in self._workers:
            if not _my_child(pid):
                continue  # killed and reaped mid-burst: its pid may be someone else's now
            try:
                if self._boost.policy == "rr":
                    os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
                _set_nice(pid, self.base_nice)
            except OSError:
                pass
        self.raised = False


def _my_child(pid: int) -> bool:
    """Whether ``pid`` is still a child of this process (a worker or helper diag started) -
    checked before a priority is put back, since one killed and reaped during the burst may
    have had its pid handed to another process, the job's perhaps."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read(4096)
        return int(stat.rpartition(b")")[2].split()[1]) == os.getpid()
    except (OSError, ValueError, IndexError):
        return False


class Boost:
    """``with boost.burst() as burst: ...; burst.add_workers(pids)`` around each sample."""

    def __init__(self, policy: BoostPolicy = "nice") -> None:
        self.policy: BoostPolicy = policy
        self.denied: Optional[str] = None  # why bursts run unboosted (no privilege...)
        self.rt_denied: Optional[str] = None  # why workers get nice, not real time
        self.bursts_raised = 0
        self._rt_bounded: Set[int] = set()

    def burst(self) -> _BurstContext:
        return _BurstContext(self)

    def bound_rt(self, pid: int) -> None:
        """``RLIMIT_RTTIME`` of a worker, once: the kernel's strict bound on a real-time
        worker that would not block (its ``SIGXCPU`` handler is ``demote_self``)."""
        if pid not in self._rt_bounded:
            limits = (int(RT_SOFT_S * 1e6), int(RT_HARD_S * 1e6))
            resource.prlimit(pid, resource.RLIMIT_RTTIME, limits)
            self._rt_bounded.add(pid)

    def _start(self) -> Burst:
        base = os.getpriority(os.PRIO_PROCESS, 0)
        burst = Burst(self, base)
        if self.policy == "off" or self.denied is not None:
            return burst
        if base > 0:
            self.denied = f"diag runs niced ({base}): left as asked"
            return burst
        if not burst.raise_own():
            burst.raised = True  # put back the threads changed before the refusal
            burst.restore()
            self.denied = "no privilege to raise the priority (CAP_SYS_NICE)"
            return burst
        self.bursts_raised += 1
        return burst


class _BurstContext:
    def __init__(self, boost: Boost) -> None:
        self._boost = boost
        self._burst: Optional[Burst] = None

    def __enter__(self) -> Burst:
        self._burst = self._boost._start()
        return self._burst

    def __exit__(
        self,
        _type: Optional[Type[BaseException]],
        _value: Optional[BaseException],
        _tb: Optional[TracebackType],
    ) -> None:
        if self._burst is not None:
            self._burst.restore()
