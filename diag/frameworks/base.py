"""What diag knows about one framework, as one frozen record: a ``Pack``.

Why records and not code: a rule that names a framework decides only for the frameworks its
author met; a pack lists what a framework *does* (its processes, its poll loops, its ready and
death lines, its clocks, its native progress engines) and the generic cause modules of
``diag.verdict`` read the union of every pack (``diag.frameworks.union``). Teaching diag a new
framework is then one file here plus its test (docs/frameworks.md says how).

Every field is data: names, file fragments, regular-expression *sources* (compiled once, by the
union), numbers with their unit in the name. A field a framework has nothing for stays empty.
Imports nothing of diag but the closed sets in ``diag.vocab``, so every stage may read packs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import FrozenSet, Literal, Optional, Tuple

# What a clock does when it fires.
ClockAction = Literal["aborts", "kills", "fails_startup", "restarts", "warns"]
# What starts its count.
ClockStart = Literal["start", "collective", "quiet", "step", "request", "join", "absolute"]
# A process's role in a framework's layout (more specific than ``diag.vocab.Role``).
FrameworkRole = Literal[
    "front end",
    "scheduler",
    "engine core",
    "worker",
    "detokenizer",
    "agent",
    "store host",
    "controller",
    "proxy",
    "replica",
    "raylet",
    "helper",
]


@dataclass(frozen=True)
class RoleSign:
    """A process is ``role`` when its title or argv[0..3] contains ``title`` (case-insensitive).

    ``rank_pattern``: a regex source whose first group is the rank (``scheduler_TP(\\d+)``)."""

    title: str
    role: FrameworkRole
    rank_pattern: Optional[str] = None


@dataclass(frozen=True)
class Clock:
    """A timeout the framework puts on a job: what fires, after how long, counted from what.

    Read from the job where it is set (``argv_flag``, ``env``; ``env_scale`` converts the
    variable's unit to seconds, 0.001 for milliseconds), else ``default_s`` for the version
    named in ``source``."""

    name: str  # "SGLang's watchdog"
    default_s: Optional[float]
    starts: ClockStart
    action: ClockAction
    argv_flag: Optional[str] = None
    env: Optional[str] = None
    env_scale: float = 1.0
    # Whether it can fire while a rank loads (else only once the job runs).
    during_startup: bool = False
    # How late it may fire, as a multiple of its budget (a watchdog that looks every half
    # budget fires 1-1.5 budgets after the last step).
    late_factor: float = 1.0
    source: str = ""  # where the default was read: "sglang 0.5 server_args.py"


@dataclass(frozen=True)
class NativeProgress:
    """A communication library's progress engine: a thread on one of ``symbols`` (or named
    one of ``thread_names``) in one of ``libraries`` is waiting for a message, not computing,
    however much CPU it burns."""

    libraries: Tuple[str, ...]  # file-name fragments: "libmpi.so", "libucp.so"
    symbols: FrozenSet[str] = frozenset()  # ELF symbol names or prefixes ending in "*"
    thread_names: Tuple[str, ...] = ()  # comm prefixes of its progress threads
    what: str = ""  # "MPI's progress engine polls for a message"


@dataclass(frozen=True)
class Pack:
    """Everything diag knows about one framework (see the module docstring)."""

    name: str  # "SGLang"
    key: str  # "sglang": the module's name, used in tests and docs
    # --- recognising it
    argv: Tuple[str, ...] = ()  # fragments of argv[0..3]: "sglang.launch_server"
    titles: Tuple[str, ...] = ()  # process-title fragments: "sglang::"
    modules: Tuple[str, ...] = ()  # file fragments of its frames: "sglang/srt/"
    env: Tuple[str, ...] = ()  # env names only it sets: "SGLANG_"
    # --- its processes
    roles: Tuple[RoleSign, ...] = ()
    launchers: FrozenSet[str] = frozenset()  # process names that only start ranks
    helpers: Tuple[str, ...] = ()  # process-title fragments of helpers, never ranks
    backend_threads: Tuple[str, ...] = ()  # comm prefixes of its own background threads
    # --- its waits
    idle_frames: FrozenSet[str] = frozenset()  # functions its idle loops wait in
    poll_frames: FrozenSet[str] = frozenset()  # functions of its poll loops
    poll_files: Tuple[str, ...] = ()  # file fragments of its poll loops
    receive_frames: FrozenSet[str] = frozenset()  # a receive that waits on a peer
    collective_frames: FrozenSet[str] = frozenset()  # collectives (a peer must join)
    rendezvous_frames: FrozenSet[str] = frozenset()  # joining the job's rendezvous / store
    housekeeping_frames: FrozenSet[str] = frozenset()  # its own long polls and RPCs
    lock_frames: FrozenSet[str] = frozenset()  # lock libraries' acquire/retry loops
    work_files: Tuple[str, ...] = ()  # file fragments where its frames are model work
    native: Tuple[NativeProgress, ...] = ()
    # --- its logs (regular-expression sources)
    ready_lines: Tuple[str, ...] = ()
    heartbeat_lines: Tuple[str, ...] = ()  # stats lines that repeat whether or not work moves
    progress_lines: Tuple[str, ...] = ()  # completions: a step, a request served
    failure_lines: Tuple[str, ...] = ()  # its own spellings of a failure/stall
    death_lines: Tuple[str, ...] = ()
    # --- its start-up (phase -> frames that mean it)
    startup_frames: Tuple[Tuple[str, FrozenSet[str]], ...] = ()
    # --- its clocks
    clocks: Tuple[Clock, ...] = ()
    # Where each fact was checked (a source path and version), for the next reader.
    sources: Tuple[str, ...] = field(default=())
