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

from diag.vocab import (
    CollectiveLogKind,
    EvidenceSignal,
    FrameWaitKind,
    FsKind,
    LogKindMeaning,
    StartupPhase,
)

# What a clock does when it fires.
# "proceeds": the wait ends without the missing party (torchrun's last call starts the job
# with the nodes that joined).
ClockAction = Literal["aborts", "kills", "fails_startup", "restarts", "warns", "proceeds"]
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
# A wait a frame names and a start-up phase: ``diag.vocab`` (one definition each).


@dataclass(frozen=True)
class RoleSign:
    """A process is ``role`` when its title or argv[0..3] contains ``title`` (case-insensitive).

    ``rank_pattern``: a regex source whose first group is the rank (``scheduler_TP(\\d+)``)."""

    title: str  # a fragment of its title or argv: "sglang::scheduler"
    role: FrameworkRole  # the part it plays
    rank_pattern: Optional[str] = None  # a regex source, group 1 its rank: r"TP(\d+)"


@dataclass(frozen=True)
class TitledRole:
    """A process whose setproctitle title is its pack's ``title_prefix`` + ``part``, then
    index suffixes (``_TP0``, ``_DP1_TP3``), plays ``role`` and is called ``label`` (+ the
    suffix: "scheduler TP0"). A TP index in the suffix is the process's rank."""

    part: str  # the title's part after the prefix: "scheduler", "EngineCore"
    role: str  # the report's role column: "scheduler", "engine core", "DP controller"
    label: str  # how a sentence names it: "scheduler", "EngineCore", "DP coordinator"


@dataclass(frozen=True)
class CommandRole:
    """A process whose command line reads as one of the framework's own (it keeps its argv,
    no title): ``python -m <module>``, ``<program> <subcommand>``, or an argv[1..3] element
    holding ``fragment``. Any one of the three set is enough."""

    role: str  # the report's role column: "API server", "helper"
    label: str  # how a sentence names it: "main (HTTP + tokenizer)"
    module: str = ""  # an argv[1..3] element equal to it: "sglang.launch_server"
    program: str = ""  # argv[0..1]'s basename, with ``subcommand`` in argv[1..3]: "vllm"
    subcommand: str = ""  # "serve"
    fragment: str = ""  # a fragment of an argv[1..3] element: "multiprocessing.resource_tracker"


@dataclass(frozen=True)
class FrameSign:
    """Frames whose function (the last dotted part of py-spy's qualified name: ``Queue.get``
    -> ``get``) is one of ``names``, in a file whose name ends with one of ``files`` (any file
    when ``files`` is empty). A bare name is too common to mean anything (``get``, ``wait``):
    the file says whose it is."""

    names: FrozenSet[str]  # function names, the last dotted part: "get", "dequeue"
    files: Tuple[str, ...] = ()  # file-name endings: "queue.py", "shm_broadcast.py"


@dataclass(frozen=True)
class FrameWait:
    """A frame that is a known wait of ``kind``: a thread parked there waits for what that kind
    waits on (a peer for ``collective``, a client for ``accept``, ...). The first sign of the
    union that matches a frame wins (packs in ``_MODULES`` order, signs in pack order)."""

    sign: FrameSign  # which frames
    kind: FrameWaitKind  # what a thread parked there waits for


@dataclass(frozen=True)
class Clock:
    """A timeout the framework puts on a job: what fires, after how long, counted from what.

    Read from the job where it is set (``argv_flag``, ``env``; ``env_scale`` converts the
    variable's unit to seconds, 0.001 for milliseconds), else ``default_s`` for the version
    named in ``source``."""

    name: str  # "SGLang's watchdog"
    default_s: Optional[float]  # its budget when nothing sets it; None: off unless set
    starts: ClockStart  # what starts its count ("absolute": the value is an end time)
    action: ClockAction  # what it does when it fires
    argv_flag: Optional[str] = None  # the flag that sets it: "--watchdog-timeout"
    argv_key: str = ""  # a key inside that flag's k=v,... value: torchrun's "join_timeout"
    env: Optional[str] = None  # the env variable that sets it: "VLLM_RPC_TIMEOUT"
    env_scale: float = 1.0  # the variable's unit in seconds: 0.001 for milliseconds
    # Whether it can fire while a rank loads (else only once the job runs).
    during_startup: bool = False
    # How late it may fire, as a multiple of its budget (a watchdog that looks every half
    # budget fires 1-1.5 budgets after the last step).
    late_factor: float = 1.0
    source: str = ""  # where the default was read: "sglang 0.5 server_args.py"
    # How a user raises it, as a report writes it: "`--watchdog-timeout`".
    knob: str = ""
    # Whether it holds for every process of the framework even when nothing sets it (SGLang's
    # watchdog: on by default); else only where ``argv_flag``/``env``/``enable_env`` set it.
    implied: bool = False
    # An env variable that turns it on at ``default_s`` ("1"/"true"), as
    # ``TORCH_NCCL_ENABLE_MONITORING`` turns on the heartbeat monitor.
    enable_env: Optional[str] = None
    # Its ``argv_flag`` is the main process's only (SGLang's schedulers' argv is their title):
    # the value read there holds for every process of the job.
    job_wide: bool = False
    # A watchdog that is a thread of one process role and counts only while that process runs
    # a step: the role (``diag.text.roles``' "scheduler"), the frames of a step, and the name
    # prefix of its idle loop (a process back there never fires it).
    thread_of: str = ""  # the role whose thread it is: "scheduler"
    counts_in: FrozenSet[str] = frozenset()  # frames of a step: "run_batch"
    idle_loop_prefix: str = ""  # the idle loop's name prefix: "event_loop"
    # Threads whose name starts with one of these show the clock runs in that process (a
    # backend's own threads: gloo's "pt_gloo_runloop", NCCL's "pt_nccl_watchdg"): a clock of a
    # library rather than of a command line (``diag.verdict.countdown``).
    thread_prefixes: Tuple[str, ...] = ()


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
class AgentOptions:
    """The options of a launcher agent's command line that say with whom, and where, its node
    meets the job's other nodes (``diag.verdict.rendezvous``), spelled as its parser names them
    (underscores: the parser takes dashes too), and what a missing one means. Agents whose
    values differ across hosts never meet."""

    nodes: str  # how many nodes meet (N, or MIN:MAX): "nnodes"
    endpoint: str  # host:port where they meet: "rdzv_endpoint"
    run_id: str  # the meeting's id, the same on every node: "rdzv_id"
    backend: str  # how they meet: "rdzv_backend"
    default_nodes: str = "1"  # how many nodes meet when its option is not given
    # With no endpoint, the static meeting point's host and port options ("master_addr",
    # "master_port") and the port it takes when none is given ("29500").
    static_host: str = ""
    static_port: str = ""
    default_port: str = ""

    def names(self) -> Tuple[str, ...]:
        """Every option it reads."""
        found = (self.nodes, self.endpoint, self.run_id, self.backend)
        return tuple(n for n in (*found, self.static_host, self.static_port) if n)


@dataclass(frozen=True)
class LogKind:
    """A kind of line the collector's collective-log reader sorts a rank's log into
    (``diag.probes.nccl``), what it means, and the evidence signal it becomes
    (``diag.verdict.collectives``). Failures are tried in pack order: the first a rank logged
    is its failure."""

    kind: CollectiveLogKind  # the reader's kind: "cuda_error"
    means: LogKindMeaning  # a failure, a warning, a collective that timed out
    signal: EvidenceSignal  # the evidence it becomes (a stored name): "nccl-log-cuda-error"


# Who can end a framework's own pause (``FlowPause``): the peer at the other end of the paused
# thread's connection (it must read), or the paused process's memory (it must fall).
PauseParty = Literal["peer reader", "memory"]


@dataclass(frozen=True)
class FlowPause:
    """A framework's own flow control or admission pause: a wait a named party ends, never
    "idle, healthy" by default (``diag.verdict.flow_control`` finds it, the wait-for graph
    draws a ``flow`` edge to the party). A stream writer waiting for its peer to read (gRPC's
    HTTP/2 flow control, a ZeroMQ send at its high-water mark) or a worker that paused itself
    under memory pressure (Dask) looks, by CPU and stacks alone, like a server waiting for work.

    Shown by a thread: one whose innermost ``depth`` frames hold a function of ``frames`` in a
    file containing one of ``files``, with only frames of ``via`` files above it, in every
    sample. Or by a log line: ``pause_line`` with no later ``resume_line``, the paused process
    being the one of ``files`` whose resident memory is nearest the ``used`` it reports."""

    party: PauseParty
    what: str  # "gRPC's stream writer waits for its client to read (HTTP/2 flow control)"
    # Function names (the last dotted part) a paused thread waits in: "_send_response".
    frames: FrozenSet[str] = frozenset()
    # File fragments of those frames - and of a log-shown pause's processes' frames.
    files: Tuple[str, ...] = ()
    # File fragments a thread may be in above the pause frame (its wait primitive): other
    # code there is a wait of its own (a request generator blocked on its producer).
    via: Tuple[str, ...] = ("/threading.py",)
    depth: int = 8  # how many innermost frames are searched for the pause frame
    # Regex source of the line it logs when it pauses (named groups ``pct``, ``used``,
    # ``limit`` where the line has them), and of the line it logs when it resumes.
    pause_line: str = ""
    resume_line: str = ""
    threshold: str = ""  # the setting that decides it: "distributed.worker.memory.pause"
    default_threshold_pct: float = 0.0  # that setting's default, in % (0: none to tell)
    # An argv flag of the paused process or of its parent giving the limit the threshold is
    # a share of ("--memory-limit", in bytes with a unit): where its log cannot be read, a
    # process of ``files`` holding more than ``default_threshold_pct`` of it has most likely
    # paused (said as such: the setting may be changed in a config file diag cannot see).
    limit_flag: str = ""
    remedy: str = ""  # what a user does about it, one sentence


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
    roles: Tuple[RoleSign, ...] = ()  # its processes' parts, by title
    launchers: FrozenSet[str] = frozenset()  # process names that only start ranks
    helpers: Tuple[str, ...] = ()  # process-title fragments of helpers, never ranks
    # comm prefixes of its communication backend's threads: a process running one has peers
    # (a bare ``all_reduce`` in its own code waits on them; a rank's load counts as collective)
    backend_threads: Tuple[str, ...] = ()
    # --- its waits
    idle_frames: FrozenSet[str] = frozenset()  # functions its idle loops wait in
    poll_frames: FrozenSet[str] = frozenset()  # its poll loops' receive step, if not recv_*
    poll_files: Tuple[str, ...] = ()  # file fragments of its poll loops
    receive_frames: FrozenSet[str] = frozenset()  # a receive that waits on a peer
    collective_frames: FrozenSet[str] = frozenset()  # collectives (a peer must join)
    # Point-to-point calls (a send, a receive, their batch and wait): a rank there waits on one
    # neighbour - a pipeline stage on the next or previous one (``diag.verdict.stragglers``).
    p2p_frames: FrozenSet[str] = frozenset()
    rendezvous_frames: FrozenSet[str] = frozenset()  # joining the job's rendezvous / store
    housekeeping_frames: FrozenSet[str] = frozenset()  # its own long polls and RPCs
    lock_frames: FrozenSet[str] = frozenset()  # lock libraries' acquire/retry loops
    work_files: Tuple[str, ...] = ()  # file fragments where its frames are model work
    native: Tuple[NativeProgress, ...] = ()  # its libraries' progress engines
    # --- its logs (regular-expression sources)
    ready_lines: Tuple[str, ...] = ()  # the job listens, loaded: "ready to roll"
    heartbeat_lines: Tuple[str, ...] = ()  # stats lines that repeat whether or not work moves
    progress_lines: Tuple[str, ...] = ()  # completions: a step, a request served
    failure_lines: Tuple[str, ...] = ()  # its own spellings of a failure/stall
    # The lines of its native backtraces that follow a failure line and belong to it (c10's
    # "frame #3: ..." and "<omitting python frames>"): one failure, not lines of other news.
    backtrace_lines: Tuple[str, ...] = ()
    # Its own spellings of "I will try again" that the generic retry words miss: a rank
    # asleep after one is backing off (diag.verdict.backoff), not diverged.
    retry_lines: Tuple[str, ...] = ()
    death_lines: Tuple[str, ...] = ()
    # Its scheduler's word that work can never be placed: a task or actor asking for more
    # than any node has (a waiter on its result waits for ever, nothing was lost).
    infeasible_lines: Tuple[str, ...] = ()
    # --- its start-up (phase -> frames that mean it)
    # (phase, the function names that mean a rank is in it): ("compiling", {"_compile"})
    startup_frames: Tuple[Tuple[StartupPhase, FrozenSet[str]], ...] = ()
    # --- its clocks
    clocks: Tuple[Clock, ...] = ()  # the timeouts it puts on a job
    # --- facts the first fields could not hold (each read by one generic cause module)
    # Frames that are a known wait, and of which kind (``diag.verdict.waits.frame_kind``).
    frame_waits: Tuple[FrameWait, ...] = ()
    # Frames of a rank connecting to its rendezvous *store* (a subset of ``rendezvous_frames``,
    # qualified names as py-spy gives them): nothing listens there yet -> it waits on its host.
    store_frames: FrozenSet[str] = frozenset()
    # The env variables that hold its rendezvous store's address and port: a rank holds that
    # port open (no door), and a rank joining waits on whoever should listen there.
    store_addr_env: str = ""
    store_port_env: str = ""
    # File fragments of its collectives' modules wherever the file is (``torch/distributed/``)
    # and, in ``comm_dirs``, only inside an installed package (``site-packages/.../comm/``):
    # a bare ``all_reduce`` there waits on peers; in the job's own ``comm/`` it may compute.
    comm_files: Tuple[str, ...] = ()
    comm_dirs: Tuple[str, ...] = ()
    # Decorator frames that say nothing about where a thread is (``_call_impl``).
    wrapper_frames: FrozenSet[str] = frozenset()
    # Helpers a spin-wait loop calls between polls (``sched_yield``): transparent, the wait is
    # the frame that loops on them.
    yield_frames: FrozenSet[str] = frozenset()
    # Poll loops' markers (``diag.verdict.polling``): checks that return at once
    # (``os.path.exists``), completion polls (``Future.done``), non-blocking receives by
    # name and by file (pyzmq raises ``Again`` from ``zmq/error.py``).
    check_frames: Tuple[FrameSign, ...] = ()
    completion_frames: Tuple[FrameSign, ...] = ()
    nonblocking_frames: FrozenSet[str] = frozenset()
    nonblocking_files: Tuple[str, ...] = ()
    # Thread names (exact) of its workers that run collectives started asynchronously
    # (gloo's ``pt_gloo_runloop``): a timed wait there is a collective in flight.
    collective_workers: Tuple[str, ...] = ()
    # How its launcher agent is started (argv element, its basename or ``-m`` module), the
    # rendezvous options it reads (``AgentOptions``: ``--nnodes``...) and its flags that take
    # no value.
    agent_argv: Tuple[str, ...] = ()
    agent_options: Optional[AgentOptions] = None
    agent_flags: FrozenSet[str] = frozenset()
    # Its own RPC machinery: fragments of titles/argv/frame paths of processes whose ports are
    # its housekeeping channel (Ray's gRPC), and thread names (exact) that run it.
    rpc_markers: Tuple[str, ...] = ()
    rpc_threads: FrozenSet[str] = frozenset()
    # File-lock libraries that poll: (a directory of their package, the functions that loop
    # trying the lock). The sleep between tries is theirs (``diag.frames.polled_lock``).
    lock_polls: Tuple[Tuple[str, FrozenSet[str]], ...] = ()
    # Locks that are a file's existence, polled for: (the frame that polls, what the lock is,
    # in words a report can print). Nothing holds them open: a stale one waits forever.
    file_batons: Tuple[Tuple[str, str], ...] = ()
    # A loop that waits for its next batch from worker processes: the frame-name suffixes of
    # that wait (``._next_data``) and the worker processes' loop (``_worker_loop``).
    batch_wait_frames: Tuple[str, ...] = ()
    worker_loops: FrozenSet[str] = frozenset()
    # Log patterns (regex sources) whose first group is the rank a death line names
    # (``scheduler_(\d+)``), tried in union order.
    death_rank_patterns: Tuple[str, ...] = ()
    # Start-up facts beside ``startup_frames``: file fragments of a phase's frames, name
    # prefixes of a phase's frames, log lines (regex sources) that mean a phase, and file
    # fragments whose frames convert weights as part of loading (never "converting").
    startup_files: Tuple[Tuple[StartupPhase, Tuple[str, ...]], ...] = ()
    startup_prefixes: Tuple[Tuple[StartupPhase, Tuple[str, ...]], ...] = ()
    startup_lines: Tuple[Tuple[StartupPhase, str], ...] = ()
    loading_converts: Tuple[str, ...] = ()
    # Directories a download in progress writes into (a model hub's cache): a growing file
    # there is "downloading", elsewhere the job's own output (a checkpoint).
    download_dirs: Tuple[str, ...] = ()
    # Process names (the kernel's, or argv[0]'s basename) of its compilers and build tools.
    compilers: FrozenSet[str] = frozenset()
    # Compile jobs known by their command line: (a word of argv[0..3], words one of which
    # must be there too) - Triton's compile subprocess: ("triton", ("compile", "ptxas")).
    compile_argv: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    # Frames that load weights under a name of their own: (which frames, the name a report
    # gives them) - torch/serialization.py's load/_load is "torch.load".
    loader_frames: Tuple[Tuple[FrameSign, str], ...] = ()
    # Installed packages (their top directory under site-packages) that are plumbing, not the
    # job's own code: a stack is named by its innermost frame outside them (``diag.frames``).
    plumbing_packages: FrozenSet[str] = frozenset()
    # File fragments of its code (or code it generates) wherever the file is, not only under
    # site-packages: plumbing too (torch built from source, Inductor's generated kernels).
    library_files: Tuple[str, ...] = ()
    # Handler boundaries a lock can be taken again across (``diag.verdict.self_wait``): frames
    # that only take a lock (``Lock.acquire``, ``Handler.acquire``), files whose locks are
    # re-entrant (logging's), finalizer frames (``weakref.finalize.__call__``) and logging
    # handler frames (``Handler.handle``/``emit``) a lock is taken again under.
    lock_take_frames: Tuple[FrameSign, ...] = ()
    rlock_files: Tuple[str, ...] = ()
    finalizer_frames: Tuple[FrameSign, ...] = ()
    # The loops of a server's own processes - a server the job starts for its other processes
    # (a multiprocessing manager's ``Server``), a prefork server's workers: a process running
    # one serves requests - never a rank, however it was started beside its siblings.
    server_frames: Tuple[FrameSign, ...] = ()
    # Frames of an event loop that runs coroutines (its callbacks, its run call): a blocking
    # call in a handler under one stalls the loop, every connection of it - where a sync or
    # threaded worker blocks only its own request.
    coroutine_loop_frames: Tuple[FrameSign, ...] = ()
    log_handler_frames: Tuple[FrameSign, ...] = ()
    # File endings of its queue module (a put or get there is a queue's, whoever calls it)
    # and of its threading module (the frames that wrap a thread's own entry function).
    queue_files: Tuple[str, ...] = ()
    thread_files: Tuple[str, ...] = ()
    # File endings of its worker pools' loops (a DataLoader's worker, multiprocessing.Pool's):
    # forked siblings running one are pool workers, never ranks by their start order.
    pool_worker_files: Tuple[str, ...] = ()
    # Interactive debuggers' frames: a process parked there waits for a person at a prompt.
    debugger_frames: FrozenSet[str] = frozenset()
    # How its processes are named (``diag.text.roles``): the title prefix its setproctitle
    # titles share ("sglang::"), a regex source for the part after it ("[a-z_]+?"), the parts
    # it knows, and the command lines of its processes that keep their argv.
    title_prefix: str = ""
    title_part: str = ""
    titled_roles: Tuple[TitledRole, ...] = ()
    command_roles: Tuple[CommandRole, ...] = ()
    # Its own flow control and admission pauses: a wait a party ends (a peer reading, memory
    # falling) - ``diag.verdict.flow_control`` (``FlowPause``).
    flow_pauses: Tuple[FlowPause, ...] = ()
    # Filesystem kinds whose requests its daemon processes serve (``"fuse"``): a thread asleep
    # in such a mount waits on the daemon the collector found for it, not on the wire
    # (``diag.verdict.fs_waits``).
    serves_fs: Tuple[FsKind, ...] = ()
    # The kinds of its collective-log lines (``LogKind``) the verdict turns into evidence.
    log_kinds: Tuple[LogKind, ...] = ()
    # Where each fact was checked (a source path and version), for the next reader.
    sources: Tuple[str, ...] = field(default=())
