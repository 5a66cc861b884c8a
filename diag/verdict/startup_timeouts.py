"""The kill budget a framework puts on a quiet job, read from argv and the allowlisted env
(SGLang ``--watchdog-timeout``, ``VLLM_RPC_TIMEOUT``, ``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC``,
Slurm's end time), and the warnings an ETA past one of them gives.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence

from diag.model import ProcessInfo, RankPhase
from diag.verdict.startup_signs import CONVERTING, LOADING, eta_words


class Timeout(NamedTuple):
    who: str  # "SGLang's watchdog"
    knob: str  # "`--watchdog-timeout`"
    seconds: Optional[float]  # a budget from the start of a quiet spell
    deadline_s: Optional[float]  # an absolute end (Slurm's time limit)
    during_load: bool  # can fire while a rank loads (else: only when a rank hangs)


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
        out.append(Timeout("SGLang's watchdog", "`--watchdog-timeout`", seconds, None, True))
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
    phase: RankPhase, elapsed_s: Optional[float], timeouts: Sequence[Timeout], now_s: float
) -> List[str]:
    if phase.eta_s is None:
        return []
    out = []
    done = f"{phase.progress_pct:.0f}% loaded" if phase.progress_pct is not None else "not done"
    what = "weights are" if phase.phase in (LOADING, CONVERTING) else f"{phase.phase} is"
    who = f"rank {phase.rank}" if phase.rank is not None else f"pid {phase.pid}"
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


def _hang_tail(timeouts: Sequence[Timeout], now_s: float) -> str:
    parts = []
    for t in timeouts:
        if t.deadline_s is not None:
            left = t.deadline_s - now_s
            if left > 0:
                parts.append(f"{t.who} ends it in {eta_words(left)} ({t.knob})")
        elif t.seconds is not None:
            parts.append(
                f"{t.who} ({t.knob} {t.seconds:.0f} s) should end it at most that long after "
                "it stalled"
            )
    return "; " + "; ".join(parts[:2]) if parts else ""
