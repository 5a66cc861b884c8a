"""vLLM (``vllm serve``): an API server, an engine core process (``VLLM::EngineCore``), TP
workers (``VLLM::Worker_TP1``) fed through a shared-memory message queue, its own TP
collectives (custom and shared-memory all-reduce), its RPC and iteration timeouts.

Facts from vllm 0.6-0.11 (vllm/distributed/, vllm/v1/engine/, vllm/envs.py,
vllm/model_executor/model_loader/).
"""

from __future__ import annotations

from diag.frameworks.base import (
    Clock,
    CommandRole,
    FrameSign,
    FrameWait,
    Pack,
    RoleSign,
    TitledRole,
)

# vLLM's shared-memory MessageQueue: TP workers wait here for rank 0's next broadcast.
_SHM_QUEUE = frozenset({"dequeue", "acquire_read", "broadcast_object"})

PACK = Pack(
    name="vLLM",
    key="vllm",
    argv=("vllm",),
    titles=("VLLM::",),
    modules=("vllm/",),
    env=("VLLM_",),
    roles=(
        RoleSign("VLLM::EngineCore", "engine core"),
        RoleSign("VLLM::Worker", "worker", r"TP(\d+)"),
    ),
    # setproctitle: VLLM::EngineCore, VLLM::Worker_TP1, VLLM::APIServer, VLLM::DPCoordinator.
    title_prefix="VLLM::",
    title_part="[A-Za-z]+",
    titled_roles=(
        TitledRole("EngineCore", "engine core", "EngineCore"),
        TitledRole("Worker", "worker", "worker"),
        TitledRole("APIServer", "API server", "API server"),
        TitledRole("DPCoordinator", "DP controller", "DP coordinator"),
    ),
    command_roles=(
        CommandRole("API server", "API server (vllm serve)", program="vllm", subcommand="serve"),
    ),
    frame_waits=(
        # Inference servers' own collectives (vLLM's TP ops, its CPU shared-memory all-reduce,
        # the custom all-reduce kernels; SGLang vendors them): a rank spinning in one waits on
        # its peers, it does not work.
        FrameWait(
            FrameSign(
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
                )
            ),
            "collective",
        ),
        FrameWait(FrameSign(_SHM_QUEUE | {"recv"}, ("shm_broadcast.py",)), "collective"),
    ),
    # A TP worker waiting for the scheduler's next step.
    receive_frames=frozenset({"broadcast_tensor_dict"}) | _SHM_QUEUE,
    # Its device communicators (custom all-reduce, shm broadcast): a bare collective there
    # waits on peers.
    comm_dirs=("/device_communicators/",),
    # The model executor's and models' own frames are model work.
    work_files=("/models/", "/model_executor/"),
    startup_frames=(
        (
            "loading weights",
            frozenset(
                {
                    "load_weights",
                    "load_model",
                    "safetensors_weights_iterator",
                    "pt_weights_iterator",
                }
            ),
        ),
        ("converting weights", frozenset({"process_weights_after_loading"})),
        ("compiling", frozenset({"capture_model"})),
        (
            "initialising communication",
            frozenset({"init_distributed_environment", "initialize_model_parallel"}),
        ),
        (
            "warming up",
            frozenset(
                {
                    "profile_run",
                    "_dummy_run",
                    "_dummy_sampler_run",
                    "determine_num_available_blocks",
                    "determine_available_memory",
                }
            ),
        ),
    ),
    # Quantized checkpoints' conversions after loading (vLLM's and SGLang's quant methods).
    startup_prefixes=(
        (
            "converting weights",
            ("dequant", "_dequant", "quantize", "_quantize", "requantize", "convert_"),
        ),
    ),
    startup_lines=(
        ("compiling", r"Capturing (?:CUDA graphs|cudagraphs|CUDA graph)"),
        ("warming up", r"Memory profiling takes"),
    ),
    # "Worker proc VllmWorker-1 died unexpectedly", "(Worker_TP1 pid=N)".
    death_rank_patterns=(r"VllmWorker[-_ ]?(\d+)", r"\bWorker[_ ]?TP(\d+)"),
    clocks=(
        # The API server's wait for its engines' first message on the input socket. In
        # ``vllm serve`` (one API server) that poll begins only after ``wait_for_engine_startup``
        # - which has no timeout - saw the engines' READY, i.e. after the load: it does not
        # bound a start-up there (vllm#48031, measured on 0.24 with a 5 s budget). API server
        # processes of ``--api-server-count`` > 1 / data parallel skip that wait and count
        # from their start (vllm#35547: killed at 600 s while loading shards).
        Clock(
            name="vLLM's engine-ready timeout",
            default_s=600.0,
            starts="start",
            action="fails_startup",
            env="VLLM_ENGINE_READY_TIMEOUT_S",
            knob="`VLLM_ENGINE_READY_TIMEOUT_S`",
            implied=True,
            source=(
                "vllm 0.32 vllm/envs.py (VLLM_ENGINE_READY_TIMEOUT_S = 600), "
                "v1/engine/core_client.py (MPClient polls its input socket after "
                "launch_core_engines), v1/engine/utils.py (wait_for_engine_startup: no timeout)"
            ),
        ),
        Clock(
            name="vLLM's RPC timeout",
            default_s=None,
            starts="request",
            action="fails_startup",
            env="VLLM_RPC_TIMEOUT",
            env_scale=0.001,
            knob="`VLLM_RPC_TIMEOUT` (ms)",
            during_startup=True,
            source="vllm 0.6 vllm/envs.py (VLLM_RPC_TIMEOUT, ms)",
        ),
        Clock(
            name="vLLM's engine iteration timeout",
            default_s=None,
            starts="step",
            action="kills",
            env="VLLM_ENGINE_ITERATION_TIMEOUT_S",
            knob="`VLLM_ENGINE_ITERATION_TIMEOUT_S`",
            source="vllm 0.6 vllm/envs.py (VLLM_ENGINE_ITERATION_TIMEOUT_S)",
        ),
    ),
    sources=("vllm 0.8 vllm/distributed/device_communicators/shm_broadcast.py, vllm/envs.py",),
)
