"""Which frames, wait channels and syscalls are *known waits*, and what each one waits for.

The verdict hinges on one question per thread: is it doing work, or waiting? CPU alone cannot
answer it: the CUDA runtime spins a core inside ``cudaStreamSynchronize``, gloo/NCCL spin in
collectives, and a GIL-holding C call burns 100% in a frame that is no wait at all. So a thread
is classified by its Python stack first (py-spy names the function it is parked in), then by
the kernel (wchan/syscall) for native threads and for C calls py-spy cannot see into.

Each wait has a *kind*, and the kinds fall into families the classifier reasons about:

- ``peer``: waits on another rank (collectives, barriers, rendezvous, CUDA synchronize). A job
  where nothing moves and some rank waits on a peer is deadlocked.
- ``serve``: the healthy waits of a ready service: event loops (epoll/select), accept, workers
  reading an empty request queue. Nothing moving in these is idle.
- ``lock``: blocked on a lock/condition from user code - the ingredient of a lock cycle.
- ``child``: a launcher waiting for its children (torchrun, subprocess.wait).
- ``sleep``: timed sleeps, polling loops.
- ``result``: waits for a result handed to a pool (``AsyncResult.get``, ``Future.result``):
  someone else in the job owes it an answer.
- ``stopped``: the thread is stopped (SIGSTOP, a debugger): nothing runs until SIGCONT.
- ``file-lock``: blocked taking a file lock (``flock``, ``fcntl`` F_SETLKW): the process
  holding a lock on the same file ends it (``/proc/locks`` names it), not a thread of its own.

Frame names from py-spy >= 0.4 are qualified (``Queue.get``, ``f.<locals>.wrapper``), so rules
match the last dotted component, optionally restricted to a file suffix.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, NamedTuple, Optional, Sequence, Tuple

from diag.frames import is_library
from diag.model import Frame

PEER = "peer"
SERVE = "serve"
LOCK = "lock"
CHILD = "child"
SLEEP = "sleep"
RESULT = "result"
STOPPED = "stopped"
STDIN = "stdin"
FILE_LOCK = "file-lock"

# kind -> family
FAMILY: Dict[str, str] = {
    "collective": PEER,
    "rendezvous": PEER,
    "synchronize": PEER,
    "event-loop": SERVE,
    "accept": SERVE,
    "queue": SERVE,
    "socket-read": SERVE,
    "stdin": SERVE,
    "lock": LOCK,
    "condition": LOCK,
    "join": LOCK,
    "child": CHILD,
    "sleep": SLEEP,
    "result": RESULT,
    "native-peer": PEER,
    "stopped": STOPPED,
    "file-lock": FILE_LOCK,
    # A poll loop that polls for work (``diag.verdict.polling``): it wakes by itself, a
    # request ends it - a server's wait, however busy the loop.
    "poll": SERVE,
}

# Most specific wins when a stack matches several rules (a queue get runs Condition.wait).
_PRIORITY: Dict[str, int] = {
    "collective": 9,
    "rendezvous": 9,
    "synchronize": 9,
    "child": 7,
    "result": 7,
    "queue": 6,
    "event-loop": 6,
    "accept": 6,
    "socket-read": 5,
    "join": 4,
    "condition": 3,
    "lock": 3,
    "sleep": 2,
    "stdin": 2,
}

_COLLECTIVES = frozenset(
    [
        "all_reduce",
        "all_reduce_coalesced",
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_object",
        "all_gather_coalesced",
        "all_to_all",
        "all_to_all_single",
        "broadcast",
        "broadcast_object_list",
        "reduce",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "gather",
        "gather_object",
        "scatter",
        "scatter_object_list",
        "barrier",
        "monitored_barrier",
        "send",
        "recv",
        "batch_isend_irecv",
        "_store_based_barrier",
        "_wait_for_workers",
        "_barrier",
        "wait_stream",
    ]
)
_RENDEZVOUS = frozenset(
    [
        "init_process_group",
        "_new_process_group_helper",
        "new_group",
        "rendezvous",
        "_create_c10d_store",
        "_env_rendezvous_handler",
        "_tcp_rendezvous_handler",
        "next_rendezvous",
        "_rendezvous",
        "init_device_mesh",
    ]
)


class _Rule(NamedTuple):
    names: FrozenSet[str]
    file_suffixes: Tuple[str, ...]  # empty: any file
    kind: str


_RULES: Tuple[_Rule, ...] = (
    _Rule(_COLLECTIVES, ("distributed_c10d.py", "c10d_logger.py", "distributed.py"), "collective"),
    # Inference servers' own collectives (vLLM's TP ops, its CPU shared-memory all-reduce, the
    # custom all-reduce kernels): a rank spinning in one waits on its peers, it does not work.
    _Rule(
        frozenset(
            {
                "tensor_model_parallel_all_reduce",
                "tensor_model_parallel_all_gather",
                "tensor_model_parallel_gather",
                "broadcast_tensor_dict",
                "shm_allreduce",
                "custom_all_reduce",
                "_all_reduce_out_place",
                "all_reduce_impl",
                "outplace_all_reduce",
            }
        ),
        (),
        "collective",
    ),
    # vLLM's shared-memory MessageQueue: TP workers wait here for rank 0's next broadcast.
    _Rule(
        frozenset({"dequeue", "acquire_read", "recv", "broadcast_object"}),
        ("shm_broadcast.py",),
        "collective",
    ),
    _Rule(
        _RENDEZVOUS,
        ("distributed_c10d.py", "rendezvous.py", "api.py", "device_mesh.py"),
        "rendezvous",
    ),
    _Rule(frozenset({"synchronize", "current_stream_synchronize"}), (), "synchronize"),
    _Rule(frozenset({"get", "_get"}), ("queue.py", "queues.py"), "queue"),
    # An idle ThreadPoolExecutor worker: ``work_queue.get(block=True)`` on a C SimpleQueue, so
    # py-spy's innermost frame is ``_worker`` itself, parked on a futex. It waits for work any
    # thread may submit; it holds no lock, so it is never half of a lock cycle.
    _Rule(frozenset({"_worker"}), ("concurrent/futures/thread.py", "thread.py"), "queue"),
    _Rule(frozenset({"worker"}), ("multiprocessing/pool.py", "pool.py"), "queue"),
    _Rule(
        frozenset({"recv", "recv_bytes", "_recv_bytes", "_recv", "_poll", "poll", "wait"}),
        ("multiprocessing/connection.py",),
        "queue",
    ),
    _Rule(frozenset({"select", "poll"}), ("selectors.py",), "event-loop"),
    _Rule(
        frozenset({"_run_once", "run_forever", "run_until_complete"}),
        ("base_events.py",),
        "event-loop",
    ),
    _Rule(frozenset({"serve_forever", "handle_request"}), ("socketserver.py",), "event-loop"),
    _Rule(frozenset({"accept"}), ("socket.py",), "accept"),
    _Rule(frozenset({"readinto", "recv", "recv_into"}), ("socket.py",), "socket-read"),
    _Rule(frozenset({"_wait_for_tstate_lock", "join"}), ("threading.py",), "join"),
    _Rule(frozenset({"wait", "wait_for"}), ("threading.py",), "condition"),
    _Rule(frozenset({"acquire"}), ("threading.py",), "lock"),
    _Rule(frozenset({"get", "wait", "next", "__next__"}), ("multiprocessing/pool.py",), "result"),
    # ray.get / ray.wait in a driver: a result owed by a task or an actor method (its C++
    # core worker polls with a timeout, so the kernel alone would read it as a timer).
    _Rule(frozenset({"get_objects", "get", "wait"}), ("ray/_private/worker.py",), "result"),
    _Rule(
        frozenset({"result", "exception", "wait", "as_completed"}),
        ("concurrent/futures/_base.py",),
        "result",
    ),
    _Rule(
        frozenset({"wait", "_wait", "_try_wait", "communicate", "poll", "join"}),
        ("subprocess.py", "popen_fork.py", "process.py", "pool.py", "spawn.py"),
        "child",
    ),
    _Rule(
        frozenset({"_monitor_workers", "_invoke_run", "run", "monitor", "wait"}),
        (
            "elastic/agent/server/api.py",
            "local_elastic_agent.py",
            "subprocess_handler.py",
            "api.py",
        ),
        "child",
    ),
    _Rule(frozenset({"sleep"}), ("tasks.py",), "sleep"),
    _Rule(frozenset({"readline", "read"}), ("<stdin>",), "stdin"),
)

# Kernel wait channels (prefix match) and syscalls -> kind, for native threads and C calls.
_WCHAN_PREFIXES: Tuple[Tuple[str, str], ...] = (
    ("futex_", "lock"),
    ("do_epoll_wait", "event-loop"),
    ("ep_poll", "event-loop"),
    ("do_select", "event-loop"),
    ("core_sys_select", "event-loop"),
    ("do_sys_poll", "event-loop"),
    ("poll_schedule_timeout", "event-loop"),
    ("hrtimer_nanosleep", "sleep"),
    ("do_nanosleep", "sleep"),
    ("inet_csk_accept", "accept"),
    ("sk_wait_data", "socket-read"),
    ("unix_stream_read_generic", "socket-read"),
    ("wait_woken", "socket-read"),
    ("pipe_read", "queue"),
    ("anon_pipe_read", "queue"),  # 6.x kernels
    ("pipe_write", "write-full"),  # the pipe's reader stopped reading
    ("anon_pipe_write", "write-full"),  # 6.x kernels
    ("sk_stream_wait_memory", "write-full"),  # the socket's peer stopped reading
    ("pipe_wait", "queue"),
    ("wait_for_partner", "fifo-open"),  # open() of a named pipe: no process opens the other end
    ("do_wait", "child"),
    ("flock", "file-lock"),
    ("locks_lock", "file-lock"),
    ("posix_lock", "file-lock"),
    ("fcntl", "file-lock"),
    ("__flock", "file-lock"),
    ("sigsuspend", "sleep"),
)
_SYSCALLS: Dict[str, str] = {
    "futex": "lock",
    "futex_waitv": "lock",
    "epoll_wait": "event-loop",
    "epoll_pwait": "event-loop",
    "epoll_pwait2": "event-loop",
    "select": "event-loop",
    "pselect6": "event-loop",
    "poll": "event-loop",
    "ppoll": "event-loop",
    "accept": "accept",
    "accept4": "accept",
    "recvfrom": "socket-read",
    "recvmsg": "socket-read",
    "nanosleep": "sleep",
    "clock_nanosleep": "sleep",
    "pause": "sleep",
    "wait4": "child",
    "waitid": "child",
    "flock": "file-lock",
    "fcntl": "file-lock",
}

# Library code (``diag.frames.is_library``) is what a wait passes through on its way to the
# caller; scanning stops after the first frame outside it, so a user function named `get` deep
# in a stack is not a queue wait.


# Decorator frames that say nothing about where a thread is (c10d's logging wrappers, nn.Module).
WRAPPERS = frozenset(
    {"wrapper", "inner", "_fn", "decorate_context", "_call_impl", "_wrapped_call_impl", "__call__"}
)


def short_name(frame_name: str) -> str:
    """``Queue.get`` -> ``get``; ``f.<locals>.wrapper`` -> ``wrapper``."""
    return frame_name.rsplit(".", 1)[-1] if "." in frame_name else frame_name


# Collective names with no file to restrict them to: a framework's own ``all_reduce`` (vLLM's
# ``GroupCoordinator.all_reduce``, DeepSpeed's ``comm.barrier``) is a wait on its peers. The
# name alone says nothing: a single process's pure-Python gradient averaging named
# ``all_reduce()`` computes, and read as a collective its 100% CPU became "spins in a wait"
# and the job "deadlocked". So the name counts only with a cause for a peer: the frame is in
# library code or a framework's comm module (``comm_module``), or the process has peers - a
# collective backend or a declared rank of a multi-rank job (``diag.verdict.thread_wait``).
BARE_COLLECTIVES = frozenset({"all_reduce", "barrier", "all_gather", "broadcast"})
# Where frameworks keep their collectives: torch.distributed, vLLM's and SGLang's
# ``distributed`` packages (device communicators, parallel_state), DeepSpeed's ``comm``.
_COMM_MODULES = ("/distributed/", "/comm/", "/communication/", "/device_communicators/")
_SITE_DIRS = ("site-packages/", "dist-packages/")


def comm_module(frame: Frame) -> bool:
    """The frame is torch.distributed or an installed framework's comm module - not the job's
    own source file, however its directory is named."""
    name = frame.filename
    if "torch/distributed/" in name:
        return True
    return any(site in name for site in _SITE_DIRS) and any(m in name for m in _COMM_MODULES)


def frame_kind(frame: Frame, peers: bool = False) -> Optional[str]:
    """The wait kind a single frame names, or None when it is not a known wait. ``peers``:
    the process has peers to wait on (then a bare collective name in its own code counts)."""
    name = short_name(frame.name)
    for rule in _RULES:
        if name in rule.names and (
            not rule.file_suffixes or frame.filename.endswith(rule.file_suffixes)
        ):
            return rule.kind
    if name in BARE_COLLECTIVES and (peers or is_library(frame) or comm_module(frame)):
        return "collective"
    return None


def stack_wait(frames: Sequence[Frame], peers: bool = False) -> Optional[Tuple[str, int]]:
    """(kind, frame index) of the most specific known wait near the top of a stack, or None.

    Frames are innermost first. Scanning covers the library frames at the top plus the first
    user frame below them (a user's own ``barrier`` wrapper still counts when the process has
    ``peers``), then stops.
    """
    best: Optional[Tuple[str, int]] = None
    for index, frame in enumerate(frames):
        kind = frame_kind(frame, peers)
        # Equal priority: keep the outer frame (`Connection.recv`, not its `_recv` helper).
        if kind is not None and (best is None or _PRIORITY[kind] >= _PRIORITY[best[0]]):
            best = (kind, index)
        if not is_library(frame) and short_name(frame.name) not in YIELDS:
            break
    return best


# Helpers a spin-wait loop calls between polls (vLLM's ``sched_yield()`` around its
# shared-memory queue, a sleep-0): transparent, the wait is the frame that loops on them.
YIELDS = frozenset({"sched_yield", "yield_cpu", "_spin_wait", "spin_wait", "busy_wait"})


def kernel_wait(wchan: Optional[str], syscall: Optional[str]) -> Optional[str]:
    """The wait kind the kernel reports for a sleeping thread, or None."""
    if syscall and syscall in _SYSCALLS:
        return _SYSCALLS[syscall]
    if wchan and wchan != "0":
        for prefix, kind in _WCHAN_PREFIXES:
            if wchan.startswith(prefix):
                return kind
    return None


def family(kind: Optional[str]) -> Optional[str]:
    return FAMILY.get(kind) if kind else None
