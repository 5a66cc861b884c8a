"""torch.distributed: c10d's collectives and process groups, its TCPStore rendezvous, the gloo
and NCCL backends' threads, the NCCL heartbeat monitor's clock.

Facts from torch 2.4-2.9 (torch/distributed/distributed_c10d.py, rendezvous.py,
device_mesh.py; ProcessGroupGloo.cpp / ProcessGroupNCCL.cpp thread names).
"""

from __future__ import annotations

from diag.frameworks.base import Clock, FrameSign, FrameWait, LogKind, Pack

# Collectives and point-to-point calls of c10d (and its barriers): a peer must join.
_COLLECTIVES = frozenset(
    {
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
    }
)
# torch.distributed.pipelining's schedules batch their sends and receives and wait on them
# (torch 2.4-2.13 pipelining/schedules.py).
_SCHEDULE_P2P = frozenset({"_batch_p2p", "_sorted_batch_p2p", "_wait_batch_p2p"})
# Point-to-point: c10d's send/recv (and their non-blocking forms, waited on through their Work)
# and the schedules' batches - a wait on one neighbour, not the whole group.
_P2P = frozenset({"send", "recv", "isend", "irecv", "batch_isend_irecv"}) | _SCHEDULE_P2P
# Connecting to the rendezvous store: ``init_process_group`` builds its TCPStore here and, on a
# rank that does not host it, connects to MASTER_ADDR:MASTER_PORT - retrying while nothing
# accepts there.
_STORE = frozenset({"_create_c10d_store", "TCPStore.__init__", "_tcp_rendezvous_handler"})
# Joining the job: the process group, its store, a device mesh.
_RENDEZVOUS = frozenset(
    {
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
    }
)

PACK = Pack(
    name="torch.distributed (c10d, gloo, NCCL)",
    key="torch_distributed",
    modules=("torch/distributed/",),
    env=("MASTER_ADDR", "MASTER_PORT", "TORCH_NCCL_"),
    # gloo's (``pt_gloo_runloop``, ``gloo_tcp_loop``), torch's NCCL watchdog and heartbeat
    # (``pt_nccl_*``), NCCL's own threads (``NCCL ...``, ``ncclProxy``), c10d's store.
    backend_threads=("pt_gloo", "gloo_", "NCCL", "pt_nccl", "ncclProxy", "pt_tcpstore"),
    collective_workers=("pt_gloo_runloop",),
    # A collective name anywhere (a framework's own ``all_reduce``) counts when the process has
    # peers or the frame is library or comm-module code (``diag.verdict.waits``).
    collective_frames=frozenset({"all_reduce", "barrier", "all_gather", "broadcast"}),
    # Through these ranks are handed work by one of them (a TP/PP server's followers).
    receive_frames=frozenset(
        {"broadcast", "broadcast_object_list", "scatter", "scatter_object_list", "recv", "irecv"}
    ),
    rendezvous_frames=_RENDEZVOUS,
    p2p_frames=_P2P,
    store_frames=_STORE,
    store_addr_env="MASTER_ADDR",
    store_port_env="MASTER_PORT",
    frame_waits=(
        FrameWait(
            FrameSign(_COLLECTIVES, ("distributed_c10d.py", "c10d_logger.py", "distributed.py")),
            "collective",
        ),
        FrameWait(
            FrameSign(
                _RENDEZVOUS, ("distributed_c10d.py", "rendezvous.py", "api.py", "device_mesh.py")
            ),
            "rendezvous",
        ),
        # A pipelining schedule waits on its batched sends and receives here (``w.wait()``).
        FrameWait(FrameSign(_SCHEDULE_P2P, ("pipelining/schedules.py",)), "collective"),
    ),
    comm_files=("torch/distributed/",),
    # Where frameworks keep their collectives: vLLM's and SGLang's ``distributed`` packages
    # (parallel_state), ``communication`` packages (DeepSpeed's ``comm`` is its own pack).
    comm_dirs=("/distributed/", "/communication/"),
    startup_frames=(
        (
            "initialising communication",
            _RENDEZVOUS | {"_store_based_barrier"},
        ),
    ),
    # "[rank3]: ... local_rank: 3": torch's (and elastic's) ways of naming a rank in a log.
    death_rank_patterns=(
        r"\blocal_rank\s*[:=]\s*(\d+)",
        r"(?i)\brank\s*[:=]?\s*(\d+)",
        r"\bTP(\d+)\b",
    ),
    completion_frames=(),
    clocks=(
        # A collective that waits longer than its process group's timeout fails the waiting
        # rank (gloo raises in the collective; NCCL's watchdog aborts the communicator and,
        # with TORCH_NCCL_ASYNC_ERROR_HANDLING's default, the process). The budget is the
        # ``timeout=`` of init_process_group/new_group: its default is what a stack cannot show.
        Clock(
            name="torch.distributed's gloo collective timeout",
            default_s=1800.0,
            starts="collective",
            action="aborts",
            knob="`timeout=` of `init_process_group`",
            thread_prefixes=("pt_gloo_runloop", "gloo_tcp_loop"),
            source="torch 2.13 torch/distributed/constants.py default_pg_timeout (30 min)",
        ),
        Clock(
            name="torch.distributed's NCCL watchdog",
            default_s=600.0,
            starts="collective",
            action="kills",
            knob="`timeout=` of `init_process_group`",
            thread_prefixes=("pt_nccl_watchdg", "pt_nccl_heartbt"),
            source="torch 2.6 ProcessGroupNCCL.hpp kProcessGroupNCCLDefaultTimeout (10 min)",
        ),
        Clock(
            name="torch's NCCL heartbeat monitor",
            default_s=480.0,
            starts="quiet",
            action="kills",
            env="TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
            enable_env="TORCH_NCCL_ENABLE_MONITORING",
            knob="`TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC`",
            source="torch 2.4 ProcessGroupNCCL.cpp (heartbeatTimeoutInSec_ default 8 min)",
        ),
    ),
    # c10d's TCPStore client retries its connect until the store's host listens (socket.cpp).
    retry_lines=(r"The client socket has failed to connect to",),
    # What its collective-log lines mean (the collector's reader: ``diag.probes.nccl``): a CUDA
    # error, an Xid and an NCCL error explain a rank that then exited, most specific first; a
    # WARN line is counted; the watchdog's timeout names the ranks that waited.
    log_kinds=(
        LogKind("cuda_error", "failure", "nccl-log-cuda-error"),
        LogKind("xid", "failure", "nccl-log-xid"),
        LogKind("nccl_error", "failure", "nccl-log-nccl-error"),
        LogKind("nccl_warn", "warning", "nccl-log-warn"),
        LogKind("watchdog_timeout", "timeout", "nccl-watchdog-timeout"),
    ),
    sources=("torch 2.6 torch/distributed/distributed_c10d.py, rendezvous.py",),
)
