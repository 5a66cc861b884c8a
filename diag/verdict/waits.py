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

from typing import Dict, Final, Optional, Sequence, Tuple

from diag.frames import SITE_DIRS, is_library
from diag.frameworks import union
from diag.model import Frame
from diag.vocab import WaitFamily, WaitKind

# ``Final``: each is its literal type, so one name serves as a family and, where they share the
# word, as a kind (a ``sleep`` kind is of the ``sleep`` family).
PEER: Final = "peer"
SERVE: Final = "serve"
LOCK: Final = "lock"
CHILD: Final = "child"
SLEEP: Final = "sleep"
RESULT: Final = "result"
STOPPED: Final = "stopped"
STDIN: Final = "stdin"
FILE_LOCK: Final = "file-lock"

# kind -> family; the kinds of no family (a write to a full pipe, a fifo's open, a disk wait,
# a sleep the kernel names in no table) are read by the graph's edges, not by their family.
FAMILY: Dict[WaitKind, WaitFamily] = {
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
_PRIORITY: Dict[WaitKind, int] = {
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

# Kernel wait channels (prefix match) and syscalls -> kind, for native threads and C calls.
_WCHAN_PREFIXES: Tuple[Tuple[str, WaitKind], ...] = (
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
_SYSCALLS: Dict[str, WaitKind] = {
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
WRAPPERS = union.WRAPPER_FRAMES


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
BARE_COLLECTIVES = union.COLLECTIVE_FRAMES


def comm_module(frame: Frame) -> bool:
    """The frame is torch.distributed or an installed framework's comm module - not the job's
    own source file, however its directory is named."""
    name = frame.filename
    if any(m in name for m in union.COMM_FILES):
        return True
    return any(site in name for site in SITE_DIRS) and any(m in name for m in union.COMM_DIRS)


def frame_kind(frame: Frame, peers: bool = False) -> Optional[WaitKind]:
    """The wait kind a single frame names, or None when it is not a known wait. ``peers``:
    the process has peers to wait on (then a bare collective name in its own code counts)."""
    name = short_name(frame.name)
    for files, kind in union.FRAME_WAITS.get(name, ()):
        if not files or frame.filename.endswith(files):
            return kind
    if name in BARE_COLLECTIVES and (peers or is_library(frame) or comm_module(frame)):
        return "collective"
    return None


def runs_coroutines(frames: Sequence[Frame]) -> bool:
    """The stack runs under an event loop of coroutines (``union.COROUTINE_LOOP_FRAMES``): a
    blocking call on it stalls every connection of the loop, not one request."""
    return any(
        union.matches(union.COROUTINE_LOOP_FRAMES, short_name(f.name), f.filename) for f in frames
    )


def stack_wait(frames: Sequence[Frame], peers: bool = False) -> Optional[Tuple[WaitKind, int]]:
    """(kind, frame index) of the most specific known wait near the top of a stack, or None.

    Frames are innermost first. Scanning covers the library frames at the top plus the first
    user frame below them (a user's own ``barrier`` wrapper still counts when the process has
    ``peers``), then stops.
    """
    best: Optional[Tuple[WaitKind, int]] = None
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
YIELDS = union.YIELD_FRAMES


def kernel_wait(wchan: Optional[str], syscall: Optional[str]) -> Optional[WaitKind]:
    """The wait kind the kernel reports for a sleeping thread, or None."""
    if syscall and syscall in _SYSCALLS:
        return _SYSCALLS[syscall]
    if wchan and wchan != "0":
        for prefix, kind in _WCHAN_PREFIXES:
            if wchan.startswith(prefix):
                return kind
    return None


def family(kind: Optional[WaitKind]) -> Optional[WaitFamily]:
    return FAMILY.get(kind) if kind else None
