"""The kill budget a framework puts on a quiet job, read from argv and the allowlisted env
(SGLang ``--watchdog-timeout``, ``VLLM_RPC_TIMEOUT``, ``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC``,
Slurm's end time), and the warnings an ETA past one of them gives.
"""

from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Sequence

from diag.model import Bundle, ProcessInfo, RankPhase
from diag.text.roles import framework_role, named
from diag.verdict.features import ProcSignals
from diag.verdict.startup_signs import CONVERTING, LOADING, eta_words
from diag.verdict.thread_wait import frames_of
from diag.verdict.waits import PEER, short_name

SGLANG_WATCHDOG = "SGLang's watchdog"


class Timeout(NamedTuple):
    who: str  # "SGLang's watchdog"
    knob: str  # "`--watchdog-timeout`"
    seconds: Optional[float]  # a budget from the start of a quiet spell
    deadline_s: Optional[float]  # an absolute end (Slurm's time limit)
    during_load: bool  # can fire while a rank loads (else: only when a rank hangs)
    # How late it may fire, as a multiple of ``seconds``: SGLang's watchdog looks every half
    # budget, so it fires 1-1.5 budgets after the last step.
    late: float = 1.0


def _flag(argv: Sequence[str], name: str) -> Optional[str]:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _number(text: Optional[str]) -> Optional[float]:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def timeouts_of(info: ProcessInfo) -> List[Timeout]:
    """The framework timeouts one process's argv and env set (or imply by default)."""
    out: List[Timeout] = []
    argv, env = info.cmdline, info.env
    sglang = "sglang" in info.name.lower() or any("sglang" in a.lower() for a in argv[:4])
    flag = _number(_flag(argv, "--watchdog-timeout"))
    if sglang or flag is not None:
        seconds = flag if flag is not None else 300.0
        out.append(Timeout(SGLANG_WATCHDOG, "`--watchdog-timeout`", seconds, None, True, 1.5))
    rpc_ms = _number(env.get("VLLM_RPC_TIMEOUT"))
    if rpc_ms is not None:
        out.append(
            Timeout("vLLM's RPC timeout", "`VLLM_RPC_TIMEOUT` (ms)", rpc_ms / 1000, None, True)
        )
    iteration = _number(env.get("VLLM_ENGINE_ITERATION_TIMEOUT_S"))
    if iteration is not None:
        out.append(
            Timeout(
                "vLLM's engine iteration timeout",
                "`VLLM_ENGINE_ITERATION_TIMEOUT_S`",
                iteration,
                None,
                False,
            )
        )
    heartbeat = _number(env.get("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"))
    monitoring = env.get("TORCH_NCCL_ENABLE_MONITORING", "").strip().lower() in ("1", "true")
    if heartbeat is not None or monitoring:
        out.append(
            Timeout(
                "torch's NCCL heartbeat monitor",
                "`TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC`",
                heartbeat if heartbeat is not None else 480.0,
                None,
                False,
            )
        )
    end = _number(env.get("SLURM_JOB_END_TIME"))
    if end is not None and end > 0:
        out.append(
            Timeout("Slurm's time limit", "`--time` / `SLURM_JOB_END_TIME`", None, end, True)
        )
    return out


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
    """SGLang's ``--watchdog-timeout`` is a flag of the main process only (its schedulers' argv
    is their title): its value holds for every process of the job (in place)."""
    flags = [_number(_flag(p.info.cmdline, "--watchdog-timeout")) for p in procs]
    value = next((f for f in flags if f is not None), None)
    if value is None:
        return
    for items in timeouts.values():
        items[:] = [t._replace(seconds=value) if t.who == SGLANG_WATCHDOG else t for t in items]


# A scheduler's main thread in one of these runs a batch: SGLang's watchdog counts (it counts
# while `cur_batch_for_debug` is set or the scheduler initializes, sglang/srt/managers/
# scheduler_components/invariant_checker.py).
_BATCH_FRAMES = frozenset(
    {"run_batch", "forward_batch_generation", "forward_batch_split_prefill", "forward"}
)


def sglang_watchdog_blocked(bundle: Bundle, procs: Sequence[ProcSignals]) -> Optional[str]:
    """How SGLang's watchdog stands to this hang when it may not end it (a phrase), or None
    when it will (or diag cannot tell).

    The watchdog is a daemon thread of each scheduler process: a stopped (or dead) scheduler's
    never runs. It counts only while a batch is set (``cur_batch_for_debug``, set each loop
    iteration from the batch it runs) or the scheduler initializes: a scheduler back in its
    event loop waiting for requests never fires it, however long a client waits for a stopped
    detokenizer or main process. A scheduler blocked in its loop's receive on a peer rank (the
    request broadcast) keeps the batch of the iteration before: it fires only if one ran."""
    schedulers = [
        p
        for p in procs
        if (role := framework_role(p.info.cmdline, p.info.name)) is not None
        and role.role == "scheduler"
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
            return None  # no stack: diag cannot tell
        if names & _BATCH_FRAMES or not any(n.startswith("event_loop") for n in names):
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
        if t.who == SGLANG_WATCHDOG and blocked and blocked.startswith("will not"):
            parts.append(f"{t.who} ({t.knob}) {blocked}")
        elif t.who == SGLANG_WATCHDOG and blocked and t.seconds is not None:
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
