"""Dask distributed: a scheduler, workers (each under a nanny process) and clients - data
preprocessing, feature pipelines and hyper-parameter sweeps beside or inside training jobs.

Its workers pause themselves: the memory monitor (``distributed.worker_memory``) checks the
worker process's RSS every ``monitor-interval`` (100 ms) and, above the
``distributed.worker.memory.pause`` fraction of the worker's limit (0.80 by default), logs
"Worker is at N% memory usage. Pausing worker." and sets the worker's status to ``paused``:
it starts no new task until its memory falls below the threshold again ("Resuming worker").
Its event loop and its task threads look exactly like an idle worker's, and the client
waiting on its tasks like a client with nothing to do - but memory can end the wait, and
unmanaged memory (a leak in a task's library) never falls by itself. That is a
``flow_pauses`` entry (``diag.verdict.flow_control``).
"""

from __future__ import annotations

from diag.frameworks.base import FlowPause, Pack, RoleSign

PACK = Pack(
    name="Dask distributed",
    key="dask",
    # `dask worker` / `dask scheduler` (and the older dask-worker / dask-scheduler scripts).
    argv=("dask-worker", "dask-scheduler", "distributed.cli.dask_"),
    # With setproctitle installed, a worker's title is "dask worker [tcp://...]".
    titles=("dask worker", "dask scheduler"),
    modules=("distributed/",),
    env=("DASK_DISTRIBUTED__",),
    roles=(
        RoleSign(title="dask worker", role="worker"),
        RoleSign(title="dask-worker", role="worker"),
        RoleSign(title="dask scheduler", role="scheduler"),
        RoleSign(title="dask-scheduler", role="scheduler"),
    ),
    # The nanny-spawned worker's watch threads and the nanny's message-queue watcher (a task
    # thread's wait, ``_worker`` in distributed/threadpoolexecutor.py, is too common a name).
    idle_frames=frozenset({"watch_stop_q", "monitor_parent", "_watch_message_queue"}),
    # The nanny's "Worker ADDR (pid=N) exceeded 95% memory budget. Restarting..." is no
    # ``death_lines`` entry: the nanny starts a new worker, the job goes on.
    flow_pauses=(
        FlowPause(
            party="memory",
            what="the Dask worker paused itself for memory: it starts no task until its "
            "memory falls below its pause threshold",
            # The worker process: its task threads (distributed's own ThreadPoolExecutor) or
            # the nanny's watch thread in the spawned worker.
            files=("distributed/threadpoolexecutor.py", "distributed/nanny.py"),
            pause_line=r"Worker is at (?P<pct>\d+)% memory usage\. Pausing worker\."
            r"(?:\s+Process memory: (?P<used>[\d.]+ [KMGT]?i?B)"
            r" -- Worker memory limit: (?P<limit>[\d.]+ [KMGT]?i?B))?",
            resume_line=r"Worker is at \d+% memory usage\. Resuming worker\.",
            threshold="distributed.worker.memory.pause",
            default_threshold_pct=80.0,
            # `dask worker --memory-limit 8GiB` (the nanny's argv; its worker is spawned).
            limit_flag="--memory-limit",
            remedy="free the worker's memory (a leak in a task's library is unmanaged memory: "
            "client.restart() or restart that worker), raise its memory_limit, or make tasks "
            "smaller; it resumes by itself once its memory falls below the threshold",
        ),
    ),
    sources=(
        "distributed 2026.8.0 distributed/worker_memory.py: WorkerMemoryManager."
        "_maybe_pause_or_unpause (l. 201-235: the 'Pausing worker' / 'Resuming worker' "
        "warnings, worker.status = Status.paused)",
        "distributed 2026.8.0 distributed/distributed.yaml: worker.memory target 0.60, spill "
        "0.70, pause 0.80, terminate 0.95, monitor-interval 100ms",
        "distributed 2026.8.0 distributed/worker_memory.py l. 410: the nanny's 'Worker ADDR "
        "(pid=N) exceeded 95% memory budget. Restarting...' line",
        "distributed 2026.8.0 distributed/worker.py, scheduler.py: setproctitle('dask worker "
        "[ADDR]'), 'dask scheduler [ADDR]' (only with setproctitle installed)",
        "distributed 2026.8.0 distributed/threadpoolexecutor.py: _worker (a task thread's "
        "queue.get); distributed/nanny.py: WorkerProcess._run.<locals>.watch_stop_q",
    ),
)
