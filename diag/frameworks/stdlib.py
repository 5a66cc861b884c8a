"""Python's standard library (threading, queue, asyncio, multiprocessing, concurrent.futures,
selectors, socket, socketserver / http.server, subprocess, sqlite3, logging, weakref, pdb):
the waits every Python job passes through, whatever framework it runs.

Facts from CPython 3.9-3.13's ``Lib/`` (the function names py-spy shows there).
"""

from __future__ import annotations

from diag.frameworks.base import CommandRole, FrameSign, FrameWait, Pack

PACK = Pack(
    name="Python standard library",
    key="stdlib",
    # multiprocessing's daemons: one per job that uses it, never a rank.
    helpers=("resource_tracker", "forkserver", "semaphore_tracker"),
    command_roles=(
        CommandRole("helper", "resource tracker", fragment="multiprocessing.resource_tracker"),
    ),
    frame_waits=(
        FrameWait(FrameSign(frozenset({"get", "_get"}), ("queue.py", "queues.py")), "queue"),
        # An idle ThreadPoolExecutor worker: ``work_queue.get(block=True)`` on a C SimpleQueue,
        # so py-spy's innermost frame is ``_worker`` itself, parked on a futex. It waits for
        # work any thread may submit; it holds no lock, so it is never half of a lock cycle.
        FrameWait(
            FrameSign(frozenset({"_worker"}), ("concurrent/futures/thread.py", "thread.py")),
            "queue",
        ),
        FrameWait(
            FrameSign(frozenset({"worker"}), ("multiprocessing/pool.py", "pool.py")), "queue"
        ),
        FrameWait(
            FrameSign(
                frozenset({"recv", "recv_bytes", "_recv_bytes", "_recv", "_poll", "poll", "wait"}),
                ("multiprocessing/connection.py",),
            ),
            "queue",
        ),
        FrameWait(FrameSign(frozenset({"select", "poll"}), ("selectors.py",)), "event-loop"),
        FrameWait(
            FrameSign(
                frozenset({"_run_once", "run_forever", "run_until_complete"}), ("base_events.py",)
            ),
            "event-loop",
        ),
        FrameWait(
            FrameSign(frozenset({"serve_forever", "handle_request"}), ("socketserver.py",)),
            "event-loop",
        ),
        FrameWait(FrameSign(frozenset({"accept"}), ("socket.py",)), "accept"),
        FrameWait(
            FrameSign(frozenset({"readinto", "recv", "recv_into"}), ("socket.py",)), "socket-read"
        ),
        FrameWait(
            FrameSign(frozenset({"_wait_for_tstate_lock", "join"}), ("threading.py",)), "join"
        ),
        FrameWait(FrameSign(frozenset({"wait", "wait_for"}), ("threading.py",)), "condition"),
        FrameWait(FrameSign(frozenset({"acquire"}), ("threading.py",)), "lock"),
        # Before ``child`` below: a pool's ``AsyncResult.wait`` waits for a result, not a child.
        FrameWait(
            FrameSign(frozenset({"get", "wait", "next", "__next__"}), ("multiprocessing/pool.py",)),
            "result",
        ),
        FrameWait(
            FrameSign(
                frozenset({"result", "exception", "wait", "as_completed"}),
                ("concurrent/futures/_base.py",),
            ),
            "result",
        ),
        FrameWait(
            FrameSign(
                frozenset({"wait", "_wait", "_try_wait", "communicate", "poll", "join"}),
                ("subprocess.py", "popen_fork.py", "process.py", "pool.py", "spawn.py"),
            ),
            "child",
        ),
        FrameWait(FrameSign(frozenset({"sleep"}), ("tasks.py",)), "sleep"),
        FrameWait(FrameSign(frozenset({"readline", "read"}), ("<stdin>",)), "stdin"),
    ),
    # os.sched_yield and the names spin loops give their pause between polls.
    yield_frames=frozenset({"sched_yield", "yield_cpu", "_spin_wait", "spin_wait", "busy_wait"}),
    wrapper_frames=frozenset({"wrapper", "inner", "__call__"}),
    # Checks that return at once: a yes/no (or a size) about the world, microseconds each.
    check_frames=(
        FrameSign(
            frozenset({"exists", "lexists", "isfile", "isdir", "islink", "getsize", "getmtime"}),
            ("/genericpath.py", "/posixpath.py", "<frozen genericpath>", "<frozen posixpath>"),
        ),
        FrameSign(frozenset({"is_set", "isSet"}), ("/threading.py",)),
        FrameSign(
            frozenset({"empty", "qsize", "full"}), ("/queue.py", "/multiprocessing/queues.py")
        ),
    ),
    # Receives that return at once when there is nothing (queue's, and the common spellings).
    nonblocking_frames=frozenset(
        {
            "get_nowait",
            "put_nowait",
            "recv_nowait",
            "try_recv",
            "try_get",
            "poll_once",
            "recv_noblock",
        }
    ),
    # threading's and logging's lock takers; logging's locks are RLocks (their owner re-enters).
    lock_take_frames=(
        FrameSign(
            frozenset({"acquire", "__enter__", "_acquireLock", "_acquire_restore"}),
            ("threading.py", "logging/__init__.py"),
        ),
    ),
    rlock_files=("logging/__init__.py",),
    queue_files=("/queue.py",),
    thread_files=("/threading.py",),
    pool_worker_files=("multiprocessing/pool.py", "concurrent/futures/process.py"),
    # weakref.finalize's call and a WeakValueDictionary's removal callback run finalizers.
    finalizer_frames=(
        FrameSign(
            frozenset({"__del__", "_remove", "__call__", "callback", "_callback"}), ("weakref.py",)
        ),
    ),
    # multiprocessing.Manager()'s server process: its main thread waits for shutdown in
    # ``serve_forever``, ``accepter`` takes connections, one ``serve_client`` thread per client
    # answers the proxies' calls (a shared Lock's acquire waits there, on the server's lock).
    server_frames=(
        FrameSign(
            frozenset({"serve_forever", "accepter", "serve_client", "handle_request"}),
            ("multiprocessing/managers.py",),
        ),
    ),
    # asyncio's loop: a callback runs under ``Handle._run`` and ``_run_once``, the loop under
    # ``asyncio.run``'s ``Runner.run`` (uvloop's C loop shows only the latter).
    coroutine_loop_frames=(
        FrameSign(frozenset({"_run"}), ("asyncio/events.py",)),
        FrameSign(
            frozenset({"_run_once", "run_forever", "run_until_complete"}),
            ("asyncio/base_events.py",),
        ),
        FrameSign(frozenset({"run"}), ("asyncio/runners.py",)),
    ),
    log_handler_frames=(
        FrameSign(frozenset({"handle", "callHandlers", "emit"}), ("logging/__init__.py",)),
    ),
    # pdb's Cmd.cmdloop / Pdb.interaction, code.interact, breakpoint().
    debugger_frames=frozenset(
        {
            "cmdloop",
            "_cmdloop",
            "interaction",
            "set_trace",
            "trace_dispatch",
            "interact",
            "breakpoint",
        }
    ),
    # Utility libraries every stack passes through (CLIs, progress bars, serialisation, test
    # runners): plumbing, never the job's own code.
    plumbing_packages=frozenset(
        {
            "click",
            "tqdm",
            "setproctitle",
            "psutil",
            "cloudpickle",
            "pydantic",
            "pydantic_core",
            "msgspec",
            "jinja2",
            "_pytest",
            "pytest",
            "pluggy",
            "multiprocess",
            "dill",
        }
    ),
    sources=("CPython 3.12 Lib/ (threading, queue, asyncio, multiprocessing, concurrent, pdb)",),
)
