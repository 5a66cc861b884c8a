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
from types import TracebackType
from typing import Dict, List, Literal, Mapping, Optional, Sequence, Set, Type

BoostPolicy = Literal["nice", "rr", "off"]
POLICIES: tuple[BoostPolicy, ...] = ("nice", "rr", "off")
BOOST_NICE = -10
RR_PRIORITY = 1  # the lowest real-time priority: above every SCHED_OTHER task, below all RT
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
                _set_nice(tid, self._saved.get(tid, self.base_nice))
            except OSError:
                pass
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
