"""Ray: a driver calling ``ray.get``/``ray.wait``, its raylet and GCS server, workers and
actors titled ``ray::...``, the dashboard, autoscaler and log monitor beside them, and the
gRPC they all keep talking whatever the job does.

Facts from ray 2.9-2.40 (python/ray/_private/worker.py, its process titles and C++ core
worker thread names).
"""

from __future__ import annotations

from diag.frameworks.base import Clock, FrameSign, FrameWait, Pack

PACK = Pack(
    name="Ray",
    key="ray",
    titles=("ray::",),
    modules=("ray/",),
    env=("RAY_",),
    # Daemons beside the job that keep themselves busy (the autoscaler prints a block every
    # 5 s): their status logs and wake-ups are not the job's.
    helpers=(
        "ray/autoscaler/",
        "ray/dashboard/",
        "ray/_private/log_monitor",
        "ray/_private/runtime_env",
        "ray::DashboardAgent",
        "ray::RuntimeEnvAgent",
        "raylet",
        "gcs_server",
    ),
    frame_waits=(
        # ray.get / ray.wait in a driver: a result owed by a task or an actor method (its C++
        # core worker polls with a timeout, so the kernel alone would read it as a timer).
        FrameWait(
            FrameSign(frozenset({"get_objects", "get", "wait"}), ("ray/_private/worker.py",)),
            "result",
        ),
    ),
    # Its processes talk gRPC to each other all the time and hold long polls open on purpose.
    rpc_markers=("ray::", "raylet", "gcs_server", "ray/_private", "ray/dashboard"),
    rpc_threads=frozenset({"gcs_client_io_s", "task_event_buff", "gcs_server", "raylet"}),
    plumbing_packages=frozenset({"ray"}),
    # A task or actor whose resources no node type has: the autoscaler's event on the
    # driver's output, "(autoscaler +5s) Error: No available node types can fulfill
    # resource request {'CPU': 8.0}" (ray 2.x autoscaler, scheduler events on by default),
    # and the raylet's "infeasible" warning of older releases.
    infeasible_lines=(
        r"No available node types can fulfill resource request",
        r"(?:task|actor)\b[^\n]{0,120}\bis infeasible",
    ),
    # Ray Serve's proxy and router on requests that did not complete: the client gave up
    # ("Client for request ... disconnected, cancelling request."), a request past its
    # ``request_timeout_s``, a replica too slow or none to take it, a replica's failed health
    # check (ray 2.9-2.40 serve/_private/proxy.py, router.py, deployment_state.py).
    failure_lines=(
        r"disconnected, cancell?ing request",
        r"request (?:\S+ )?timed out after",
        r"(?:has|have) taken more than [\d.]+ ?s to",
        r"no (?:available )?replicas? (?:available|found|to (?:route|assign))",
        r"health check (?:failed|for replica)",
        r"replica \S+ (?:is )?unhealthy",
    ),
    # Ray Train's controller (v2, ray/train/v2/_internal/constants.py): a worker whose health
    # check hangs this long is marked dead and the group restarted (per its FailureConfig); a
    # worker group that does not start in time fails; its own collectives (``ray.train.report``
    # barriers) time out only when ``RAY_TRAIN_COLLECTIVE_TIMEOUT_S`` is set (-1: off).
    clocks=(
        Clock(
            name="Ray Train's worker health-check timeout",
            default_s=600.0,
            starts="quiet",
            action="restarts",
            env="RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S",
            knob="`RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S`",
            source="ray 2.50 train/v2/_internal/constants.py (10 min)",
        ),
        Clock(
            name="Ray Train's worker-group start timeout",
            default_s=60.0,
            starts="start",
            action="fails_startup",
            env="RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S",
            knob="`RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S`",
            during_startup=True,
            source="ray 2.50 train/v2/_internal/constants.py (60 s)",
        ),
        Clock(
            name="Ray Train's collective timeout",
            default_s=None,
            starts="collective",
            action="aborts",
            env="RAY_TRAIN_COLLECTIVE_TIMEOUT_S",
            knob="`RAY_TRAIN_COLLECTIVE_TIMEOUT_S`",
            source="ray 2.50 train/v2/_internal/constants.py (-1: no timeout)",
        ),
    ),
    sources=(
        "ray 2.40 python/ray/_private/worker.py",
        "ray 2.50 python/ray/train/v2/_internal/constants.py",
    ),
)
