"""The kill budget a framework puts on a quiet job, read from argv and the allowlisted env
(SGLang ``--watchdog-timeout``, ``VLLM_RPC_TIMEOUT``, ``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC``,
Slurm's end time), and the warnings an ETA past one of them gives.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from diag.frameworks import union
from diag.frameworks.base import Clock, Pack
from diag.model import Bundle, ProcessInfo, RankPhase
from diag.text.roles import framework_role, named
from diag.verdict.features import ProcSignals
from diag.verdict.startup_signs import CONVERTING, LOADING, eta_words
from diag.verdict.thread_wait import frames_of
from diag.verdict.waits import PEER, short_name


class Timeout(NamedTuple):
    who: str  # "SGLang's watchdog"
    knob: str  # "`--watchdog-timeout`"
    seconds: Optional[float]  # a budget from the start of a quiet spell
    deadline_s: Optional[float]  # an absolute end (Slurm's time limit)
    during_load: bool  # can fire while a rank loads (else: only when a rank hangs)
    # How late it may fire, as a multiple of ``seconds``: SGLang's watchdog looks every half
    # budget, so it fires 1-1.5 budgets after the last step.
    late: float = 1.0
    # Where its budget was read: "`--watchdog-timeout 700`", "`VLLM_ENGINE_READY_TIMEOUT_S=900`",
    # "" for the framework's default; what starts its count and what it does (``Clock``).
    set_by: str = ""
    starts: str = ""
    action: str = ""


def _flag(argv: Sequence[str], name: str, key: str = "") -> Optional[str]:
    """The value of ``--name V`` / ``--name=V`` (or its ``--na_me`` spelling: argparse CLIs
    such as torchrun take both); with ``key``, the value of ``key=`` inside ``V``'s
    comma-separated ``k=v`` pairs (``--rdzv-conf join_timeout=900,last_call_timeout=60``)."""
    spellings = {name, "--" + name[2:].replace("-", "_")} if name.startswith("--") else {name}
    value: Optional[str] = None
    for i, arg in enumerate(argv):
        if arg in spellings and i + 1 < len(argv):
            value = argv[i + 1]
        elif "=" in arg and arg.split("=", 1)[0] in spellings:
            value = arg.split("=", 1)[1]
        if value is not None:
            break
    if value is None or not key:
        return value
    pairs = (kv.split("=", 1) for kv in value.split(",") if "=" in kv)
    return next((v.strip() for k, v in pairs if k.strip() == key), None)


def _number(text: Optional[str]) -> Optional[float]:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _truthy(text: Optional[str]) -> bool:
    return (text or "").strip().lower() in ("1", "true")


def _timeout(pack: Pack, clock: Clock, info: ProcessInfo) -> Optional[Timeout]:
    """One clock of a pack as it holds for this process, or None when nothing turns it on."""
    argv, env = info.cmdline, info.env
    raw_flag = _flag(argv, clock.argv_flag, clock.argv_key) if clock.argv_flag else None
    value = _number(raw_flag)
    set_by = ""
    if value is not None:
        set_by = f"`{clock.argv_key or clock.argv_flag}={raw_flag}`"
    elif clock.env:
        raw = _number(env.get(clock.env))
        # A unit other than seconds: divide by its inverse (5000 ms / 1000.0 is exactly 5.0).
        value = raw if raw is None or clock.env_scale == 1.0 else raw / (1.0 / clock.env_scale)
        set_by = f"`{clock.env}={env.get(clock.env)}`" if value is not None else ""
    if value is not None and value <= 0 and clock.default_s is None:
        return None  # a non-positive value turns an opt-in clock off (Ray Train's -1)
    if clock.starts == "absolute":
        if value is None or value <= 0:
            return None
        return Timeout(
            clock.name, clock.knob, None, value, clock.during_startup, clock.late_factor,
            set_by, clock.starts, clock.action,
        )  # fmt: skip
    on = (
        value is not None
        or (clock.implied and union.recognised(pack, info.name, tuple(argv)))
        or (clock.enable_env is not None and _truthy(env.get(clock.enable_env)))
    )
    seconds = value if value is not None else clock.default_s
    if not on or seconds is None:
        return None
    return Timeout(
        clock.name, clock.knob, seconds, None, clock.during_startup, clock.late_factor,
        set_by, clock.starts, clock.action,
    )  # fmt: skip


# timeouts_of's answers by what ``_timeout`` reads of a process - its name, argv and the env
# variables the clocks name - so the 16,384 ranks of a job that share them (their env differs
# in RANK and the like) read the packs' clocks once. Bounded: argv and env are the target's.
_ANSWERS: Dict[Tuple[object, ...], Tuple[Timeout, ...]] = {}
_ANSWERS_MAX = 4096


_ENV: List[Tuple[str, ...]] = []


def _env_read() -> Tuple[str, ...]:
    """The env variables any pack's clock reads (the packs are fixed at import)."""
    if not _ENV:
        names = {c.env for _, c in union.CLOCKS} | {c.enable_env for _, c in union.CLOCKS}
        _ENV.append(tuple(sorted(n for n in names if n)))
    return _ENV[0]


def timeouts_of(info: ProcessInfo) -> List[Timeout]:
    """The framework timeouts one process's argv and env set (or imply by default): every
    pack's ``clocks``, in pack order."""
    key = (info.name, tuple(info.cmdline), *(info.env.get(n) for n in _env_read()))
    found = _ANSWERS.get(key)
    if found is None:
        if len(_ANSWERS) >= _ANSWERS_MAX:
            _ANSWERS.clear()
        each = (_timeout(pack, clock, info) for pack, clock in union.CLOCKS)
        found = _ANSWERS[key] = tuple(t for t in each if t is not None)
    return list(found)


def _budget(t: Timeout) -> str:
    return f"{t.seconds:.0f} s" if t.seconds is not None else "the job's end"


def _load_warnings(
    phase: RankPhase,
    elapsed_s: Optional[float],
    timeouts: Sequence[Timeout],
    now_s: float,
    names: Optional[Dict[int, str]] = None,
) -> List[str]:
    if phase.eta_s is None:
        return []
    out = []
    done = f"{phase.progress_pct:.0f}% loaded" if phase.progress_pct is not None else "not done"
    what = "weights are" if phase.phase in (LOADING, CONVERTING) else f"{phase.phase} is"
    who = f"rank {phase.rank}" if phase.rank is not None else f"pid {phase.pid}"
    who = (names or {}).get(phase.pid, who)
    for t in timeouts:
        if not t.during_load:
            continue
        if t.deadline_s is not None:
            fires_in: Optional[float] = t.deadline_s - now_s
        elif t.seconds is not None:
            fires_in = t.seconds - elapsed_s if elapsed_s is not None else t.seconds
        else:
            continue
        if fires_in is None or phase.eta_s <= fires_in:
            continue
        if fires_in > 0:
            when = f"fires in {eta_words(fires_in)}"
        else:
            when = f"is already due (if it counts during {phase.phase})"
        out.append(
            f"{t.who} ({_budget(t)}) {when} while {who}'s {what} {done}, "
            f"{eta_words(phase.eta_s)} to go: raise {t.knob}"
        )
    return out


def job_wide(timeouts: Dict[int, List[Timeout]], procs: Sequence[ProcSignals]) -> None:
    """A clock whose flag only the main process carries (SGLang's ``--watchdog-timeout``: its
    schedulers' argv is their title): the value read there holds for every process of the job
    (in place)."""
    for clock in _JOB_WIDE:
        flag = clock.argv_flag or ""
        flags = [_flag(p.info.cmdline, flag, clock.argv_key) for p in procs]
        raw = next((f for f in flags if _number(f) is not None), None)
        value = _number(raw)
        if value is None:
            continue
        by = f"`{clock.argv_key or flag}={raw}`"
        for items in timeouts.values():
            items[:] = [
                t._replace(seconds=value, set_by=by) if t.who == clock.name else t for t in items
            ]


_JOB_WIDE = tuple(c for _, c in union.CLOCKS if c.job_wide and c.argv_flag)
# Watchdogs that count only while their process runs a step (``Clock.counts_in``).
_STEP_WATCHDOGS = tuple(c for _, c in union.CLOCKS if c.counts_in and c.thread_of)
_STEP_WATCHDOG_NAMES = frozenset(c.name for c in _STEP_WATCHDOGS)


def step_watchdog_blocked(bundle: Bundle, procs: Sequence[ProcSignals]) -> Optional[str]:
    """How a step watchdog (``Clock.counts_in``: SGLang's) stands to this hang when it may not
    end it (a phrase), or None when it will (or diag cannot tell)."""
    for clock in _STEP_WATCHDOGS:
        found = _step_watchdog_blocked(clock, bundle, procs)
        if found is not None:
            return found
    return None


def _step_watchdog_blocked(
    clock: Clock, bundle: Bundle, procs: Sequence[ProcSignals]
) -> Optional[str]:
    """The watchdog is a daemon thread of each ``thread_of`` process (SGLang's scheduler): a
    stopped (or dead) one's never runs. It counts only while a step runs (``counts_in``) or
    the process initializes: one back in its idle loop (``idle_loop_prefix``) waiting for
    requests never fires it, however long a client waits for a stopped detokenizer or main
    process. One blocked in its loop's receive on a peer rank (the request broadcast) keeps
    the step of the iteration before: it fires only if one ran."""
    schedulers = [
        p
        for p in procs
        if (role := framework_role(p.info.cmdline, p.info.name)) is not None
        and role.role == clock.thread_of
    ]
    if not schedulers:
        return None
    live = [p for p in schedulers if not p.dead and not p.stopped]
    if not live:
        held = [p for p in schedulers if p.stopped] or schedulers
        state = "stopped" if any(p.stopped for p in held) else "gone"
        role = framework_role(held[0].info.cmdline, held[0].info.name)
        name = named(role, held[0].rank, held[0].pid) if role else f"pid {held[0].pid}"
        return f"will not end it: it is a thread of the scheduler, and {name} is {state}"
    last = {(ps.host, ps.pid): ps for ps in bundle.samples[-1].processes} if bundle.samples else {}
    on_peer = False
    for p in live:
        ps = last.get(p.key)
        main = next((t for t in ps.threads if t.tid == ps.pid), None) if ps else None
        names = {short_name(f.name) for f in frames_of(bundle, main.stack_id)} if main else set()
        if not names:
            # No stack at the last sample (a read that failed under load): whether a batch
            # runs is unknown, so the watchdog's promise is hedged, never "should end it".
            return "but only if a batch was running then (its stack could not be read)"
        if names & clock.counts_in or not any(n.startswith(clock.idle_loop_prefix) for n in names):
            return None  # a batch runs, or the scheduler initializes: the watchdog counts
        on_peer = on_peer or p.main_family == PEER
    if on_peer:
        return "but only if a batch was running then (it counts only while one runs)"
    return (
        "will not end it: it counts only while a batch runs, and the scheduler waits for requests"
    )


def _hang_tail(timeouts: Sequence[Timeout], now_s: float, blocked: Optional[str] = None) -> str:
    parts = []
    for t in timeouts:
        if t.who in _STEP_WATCHDOG_NAMES and blocked and blocked.startswith("will not"):
            parts.append(f"{t.who} ({t.knob}) {blocked}")
        elif t.who in _STEP_WATCHDOG_NAMES and blocked and t.seconds is not None:
            window = f"{t.seconds:.0f}-{t.seconds * t.late:.0f} s"
            parts.append(
                f"{t.who} ({t.knob} {t.seconds:.0f} s) ends it {window} after it stalled, {blocked}"
            )
        elif t.deadline_s is not None:
            left = t.deadline_s - now_s
            if left > 0:
                parts.append(f"{t.who} ends it in {eta_words(left)} ({t.knob})")
        elif t.seconds is not None:
            late = (
                f"{t.seconds:.0f}-{t.seconds * t.late:.0f} s" if t.late > 1 else "at most that long"
            )
            parts.append(
                f"{t.who} ({t.knob} {t.seconds:.0f} s) should end it {late} after it stalled"
            )
    return "; " + "; ".join(parts[:2]) if parts else ""
