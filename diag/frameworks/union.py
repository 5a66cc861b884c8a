"""The union of every pack, computed once at import: what the generic cause modules read.

A cause module asks "is this frame a rendezvous?", "is this thread a collective backend's?",
"does this line say the server is ready?" of every framework at once, thousands of times per
verdict (4,096 ranks x samples x frames). So every answer here is a frozenset, a tuple for a
``startswith``/``endswith``, a dict, or one compiled alternation - O(1) or one C-level scan,
as the tables were when each module kept its own. Nothing here names a framework: the packs
do (``diag.frameworks.PACKS``).
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, Iterable, List, Pattern, Tuple

from diag.frameworks import PACKS
from diag.frameworks.base import AgentOptions, Clock, CommandRole, FrameSign, Pack
from diag.vocab import EvidenceSignal, FrameWaitKind, FsKind, StartupPhase


def _names(values: Iterable[FrozenSet[str]]) -> FrozenSet[str]:
    out: set[str] = set()
    for v in values:
        out |= v
    return frozenset(out)


def _ordered(values: Iterable[Tuple[str, ...]]) -> Tuple[str, ...]:
    """Concatenated, first occurrence kept (pack order is the order of precedence)."""
    out: Dict[str, None] = {}
    for v in values:
        out.update(dict.fromkeys(v))
    return tuple(out)


def _alternation(sources: Iterable[str], flags: int = re.IGNORECASE) -> Pattern[str]:
    """One compiled regex matching any of ``sources`` (a never-matching one when empty)."""
    parts = [f"(?:{s})" for s in dict.fromkeys(sources)]
    return re.compile("|".join(parts) if parts else r"(?!x)x", flags)


def _signs(packs: Tuple[Pack, ...], field: str) -> Tuple[FrameSign, ...]:
    return tuple(sign for p in packs for sign in getattr(p, field))


# --- processes
HELPER_MARKERS: Tuple[str, ...] = _ordered(p.helpers for p in PACKS)
LAUNCHERS: FrozenSet[str] = _names(p.launchers for p in PACKS)
# ``str.startswith`` takes a tuple: one C-level scan per thread name.
BACKEND_THREADS: Tuple[str, ...] = _ordered(p.backend_threads for p in PACKS)
COLLECTIVE_WORKERS: FrozenSet[str] = frozenset(_ordered(p.collective_workers for p in PACKS))
AGENT_ARGV: FrozenSet[str] = frozenset(_ordered(p.agent_argv for p in PACKS))
# Per launcher agent: how it is started, the rendezvous options it reads, its flags that take
# no value (``diag.verdict.rendezvous``).
AGENTS: Tuple[Tuple[FrozenSet[str], AgentOptions, FrozenSet[str]], ...] = tuple(
    (frozenset(p.agent_argv), p.agent_options, p.agent_flags)
    for p in PACKS
    if p.agent_argv and p.agent_options is not None
)
RPC_MARKERS: Tuple[str, ...] = _ordered(p.rpc_markers for p in PACKS)
RPC_THREADS: FrozenSet[str] = _names(p.rpc_threads for p in PACKS)
# Collective-log line kinds (``LogKind``) -> their evidence signal, by what they mean; the
# failures in pack order (the first a rank logged is its failure).
LOG_FAILURES: Tuple[Tuple[str, EvidenceSignal], ...] = tuple(
    (k.kind, k.signal) for p in PACKS for k in p.log_kinds if k.means == "failure"
)
LOG_WARNINGS: Tuple[Tuple[str, EvidenceSignal], ...] = tuple(
    (k.kind, k.signal) for p in PACKS for k in p.log_kinds if k.means == "warning"
)
LOG_TIMEOUTS: Tuple[Tuple[str, EvidenceSignal], ...] = tuple(
    (k.kind, k.signal) for p in PACKS for k in p.log_kinds if k.means == "timeout"
)
# Filesystem kinds a daemon process serves (a FUSE mount): a wait there is on that daemon.
DAEMON_SERVED_FS: FrozenSet[FsKind] = frozenset(k for p in PACKS for k in p.serves_fs)
PLUMBING_PACKAGES: FrozenSet[str] = _names(p.plumbing_packages for p in PACKS)
LIBRARY_FILES: Tuple[str, ...] = _ordered(p.library_files for p in PACKS)

# Process titles: (prefix, its compiled title regex - group 1 the part, group 2 the index
# suffix -, part -> (role, label)) per pack that titles its processes; command-line roles.
TITLES: Tuple[Tuple[str, Pattern[str], Dict[str, Tuple[str, str]]], ...] = tuple(
    (
        p.title_prefix,
        re.compile(
            "^" + re.escape(p.title_prefix) + f"({p.title_part})" + r"(?:_((?:[A-Z]+\d+_?)+))?$"
        ),
        {t.part: (t.role, t.label) for t in p.titled_roles},
    )
    for p in PACKS
    if p.title_prefix and p.titled_roles
)
COMMAND_ROLES: Tuple[CommandRole, ...] = tuple(c for p in PACKS for c in p.command_roles)

# --- waits
RENDEZVOUS_FRAMES: FrozenSet[str] = _names(p.rendezvous_frames for p in PACKS)
STORE_FRAMES: FrozenSet[str] = _names(p.store_frames for p in PACKS)
# (address variable, port variable) of each pack's rendezvous store.
STORE_ENVS: Tuple[Tuple[str, str], ...] = tuple(
    (p.store_addr_env, p.store_port_env) for p in PACKS if p.store_port_env
)
COLLECTIVE_FRAMES: FrozenSet[str] = _names(p.collective_frames for p in PACKS)
RECEIVE_FRAMES: FrozenSet[str] = _names(p.receive_frames for p in PACKS)
P2P_FRAMES: FrozenSet[str] = _names(p.p2p_frames for p in PACKS)
COMM_FILES: Tuple[str, ...] = _ordered(p.comm_files for p in PACKS)
COMM_DIRS: Tuple[str, ...] = _ordered(p.comm_dirs for p in PACKS)
WRAPPER_FRAMES: FrozenSet[str] = _names(p.wrapper_frames for p in PACKS)
YIELD_FRAMES: FrozenSet[str] = _names(p.yield_frames for p in PACKS)
DEBUGGER_FRAMES: FrozenSet[str] = _names(p.debugger_frames for p in PACKS)
LOCK_POLLS: Tuple[Tuple[str, FrozenSet[str]], ...] = tuple(
    poll for p in PACKS for poll in p.lock_polls
)
FILE_BATONS: Dict[str, str] = {frame: what for p in PACKS for frame, what in p.file_batons}
BATCH_WAIT_FRAMES: Tuple[str, ...] = _ordered(p.batch_wait_frames for p in PACKS)
WORKER_LOOPS: FrozenSet[str] = _names(p.worker_loops for p in PACKS)
# The files of the packs that wait for batches: a batch wait is one only in their code.
BATCH_WAIT_FILES: Tuple[str, ...] = _ordered(p.modules for p in PACKS if p.batch_wait_frames)


def _frame_waits() -> Dict[str, Tuple[Tuple[Tuple[str, ...], FrameWaitKind], ...]]:
    """Function name -> its (file suffixes, kind) signs in union order: a frame's kind is the
    first whose files match (one dict lookup, then a handful of ``endswith``)."""
    out: Dict[str, List[Tuple[Tuple[str, ...], FrameWaitKind]]] = {}
    for p in PACKS:
        for wait in p.frame_waits:
            for name in wait.sign.names:
                out.setdefault(name, []).append((wait.sign.files, wait.kind))
    return {name: tuple(signs) for name, signs in out.items()}


FRAME_WAITS = _frame_waits()

# --- a lock taken again across a handler (``diag.verdict.self_wait``)
LOCK_TAKE_FRAMES: Tuple[FrameSign, ...] = _signs(PACKS, "lock_take_frames")
RLOCK_FILES: Tuple[str, ...] = _ordered(p.rlock_files for p in PACKS)
QUEUE_FILES: Tuple[str, ...] = _ordered(p.queue_files for p in PACKS)
THREAD_FILES: Tuple[str, ...] = _ordered(p.thread_files for p in PACKS)
POOL_WORKER_FILES: Tuple[str, ...] = _ordered(p.pool_worker_files for p in PACKS)
FINALIZER_FRAMES: Tuple[FrameSign, ...] = _signs(PACKS, "finalizer_frames")
LOG_HANDLER_FRAMES: Tuple[FrameSign, ...] = _signs(PACKS, "log_handler_frames")
SERVER_FRAMES: Tuple[FrameSign, ...] = _signs(PACKS, "server_frames")
COROUTINE_LOOP_FRAMES: Tuple[FrameSign, ...] = _signs(PACKS, "coroutine_loop_frames")


def matches(signs: Tuple[FrameSign, ...], name: str, filename: str) -> bool:
    """``name`` (a short frame name) in ``filename`` is one of ``signs``."""
    return any(name in s.names and (not s.files or filename.endswith(s.files)) for s in signs)


# --- poll loops
CHECK_FRAMES: Tuple[FrameSign, ...] = _signs(PACKS, "check_frames")
COMPLETION_FRAMES: Tuple[FrameSign, ...] = _signs(PACKS, "completion_frames")
NONBLOCKING_FRAMES: FrozenSet[str] = _names(p.nonblocking_frames for p in PACKS)
NONBLOCKING_FILES: Tuple[str, ...] = _ordered(p.nonblocking_files for p in PACKS)
POLL_FILES: Tuple[str, ...] = _ordered(p.poll_files for p in PACKS)
POLL_FRAMES: FrozenSet[str] = _names(p.poll_frames for p in PACKS)
WORK_FILES: Tuple[str, ...] = _ordered(p.work_files for p in PACKS)

# --- logs
READY_LINE: Pattern[str] = _alternation(s for p in PACKS for s in p.ready_lines)
DEATH_LINE: Pattern[str] = _alternation(s for p in PACKS for s in p.death_lines)
INFEASIBLE_LINE: Pattern[str] = _alternation(s for p in PACKS for s in p.infeasible_lines)
RETRY_LINE: Pattern[str] = _alternation(s for p in PACKS for s in p.retry_lines)
# A framework's own words for a completion and for a failure or stall of its requests
# (``diag.verdict.output_kinds``): Ray Serve's "cancelling request", gunicorn's WORKER TIMEOUT.
PROGRESS_LINE: Pattern[str] = _alternation(s for p in PACKS for s in p.progress_lines)
FAILURE_LINE: Pattern[str] = _alternation(s for p in PACKS for s in p.failure_lines)
BACKTRACE_LINE: Pattern[str] = _alternation(s for p in PACKS for s in p.backtrace_lines)
# Tried in order: the first that matches names the rank (a framework's own spelling first).
DEATH_RANK_PATTERNS: Tuple[Pattern[str], ...] = tuple(
    re.compile(s) for s in _ordered(p.death_rank_patterns for p in PACKS)
)


# --- start-up
def _by_phase(pairs: Iterable[Tuple[StartupPhase, FrozenSet[str]]]) -> Dict[str, FrozenSet[str]]:
    out: Dict[str, FrozenSet[str]] = {}
    for phase, names in pairs:
        out[phase] = out.get(phase, frozenset()) | names
    return out


STARTUP_FRAMES: Dict[str, FrozenSet[str]] = _by_phase(
    pair for p in PACKS for pair in p.startup_frames
)
STARTUP_FILES: Dict[str, Tuple[str, ...]] = {
    phase: _ordered(files for p in PACKS for ph, files in p.startup_files if ph == phase)
    for phase in {ph for p in PACKS for ph, _ in p.startup_files}
}
STARTUP_PREFIXES: Dict[str, Tuple[str, ...]] = {
    phase: _ordered(pre for p in PACKS for ph, pre in p.startup_prefixes if ph == phase)
    for phase in {ph for p in PACKS for ph, _ in p.startup_prefixes}
}
STARTUP_LINES: Dict[str, Pattern[str]] = {
    phase: _alternation(src for p in PACKS for ph, src in p.startup_lines if ph == phase)
    for phase in {ph for p in PACKS for ph, _ in p.startup_lines}
}
LOADING_CONVERTS: Tuple[str, ...] = _ordered(p.loading_converts for p in PACKS)
DOWNLOAD_DIRS: Tuple[str, ...] = _ordered(p.download_dirs for p in PACKS)
COMPILERS: FrozenSet[str] = _names(p.compilers for p in PACKS)


def startup_frames(phase: StartupPhase) -> FrozenSet[str]:
    return STARTUP_FRAMES.get(phase, frozenset())


COMPILE_ARGV: Tuple[Tuple[str, Tuple[str, ...]], ...] = tuple(
    c for p in PACKS for c in p.compile_argv
)
LOADER_FRAMES: Tuple[Tuple[FrameSign, str], ...] = tuple(f for p in PACKS for f in p.loader_frames)


def startup_files(phase: StartupPhase) -> Tuple[str, ...]:
    return STARTUP_FILES.get(phase, ())


def startup_prefixes(phase: StartupPhase) -> Tuple[str, ...]:
    return STARTUP_PREFIXES.get(phase, ())


def startup_line(phase: StartupPhase) -> Pattern[str]:
    return STARTUP_LINES.get(phase) or _alternation(())


# --- clocks
CLOCKS: Tuple[Tuple[Pack, Clock], ...] = tuple((p, c) for p in PACKS for c in p.clocks)


def _fragments(p: Pack) -> Tuple[str, ...]:
    return tuple(f.lower() for f in (*p.argv, *p.titles))


def recognised(p: Pack, name: str, argv: Tuple[str, ...]) -> bool:
    """The process (kernel name, argv[0..3]) is one of ``p``'s, by its argv/title fragments."""
    frags = _fragments(p)
    if not frags:
        return False
    texts = [name.lower(), *(a.lower() for a in argv[:4])]
    return any(f in t for f in frags for t in texts)


def clocks_for(*keys: str) -> Tuple[Clock, ...]:
    """The clocks of the packs named (all packs when none is named)."""
    return tuple(c for p, c in CLOCKS if not keys or p.key in keys)


def pack(key: str) -> Pack:
    """One pack by its key (for a cause that reads one framework's recognition fields)."""
    for p in PACKS:
        if p.key == key:
            return p
    raise KeyError(key)
