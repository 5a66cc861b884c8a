"""SGLang (``python -m sglang.launch_server``): an HTTP front end with its TokenizerManager,
one scheduler process per TP rank (``sglang::scheduler_TP0``), a detokenizer, a DP
controller; its watchdog kills a scheduler whose batch runs past ``--watchdog-timeout``.

Facts from sglang 0.4-0.5 (sglang/srt/managers/, sglang/srt/server_args.py,
sglang/srt/entrypoints/http_server.py).
"""

from __future__ import annotations

from diag.frameworks.base import Clock, CommandRole, Pack, RoleSign, TitledRole

PACK = Pack(
    name="SGLang",
    key="sglang",
    # Any argv element naming it ("python -m sglang.launch_server", "sglang serve").
    argv=("sglang",),
    titles=("sglang::",),
    modules=("sglang/srt/",),
    env=("SGLANG_",),
    roles=(
        RoleSign("sglang::scheduler", "scheduler", r"TP(\d+)"),
        RoleSign("sglang::detokenizer", "detokenizer"),
        RoleSign("sglang::data_parallel_controller", "controller"),
        RoleSign("sglang.launch_server", "front end"),
    ),
    # setproctitle(f"sglang::{name}{suffix}"): sglang::scheduler_TP0, sglang::detokenizer.
    title_prefix="sglang::",
    title_part="[a-z_]+?",
    titled_roles=(
        TitledRole("scheduler", "scheduler", "scheduler"),
        TitledRole("detokenizer", "detokenizer", "detokenizer"),
        TitledRole("tokenizer_worker", "tokenizer", "tokenizer worker"),
        TitledRole("data_parallel_controller", "DP controller", "DP controller"),
    ),
    # Its main process keeps its command line: FastAPI/uvicorn and the TokenizerManager.
    command_roles=(
        CommandRole("API server", "main (HTTP + tokenizer)", module="sglang.launch_server"),
        CommandRole("API server", "main (HTTP + tokenizer)", program="sglang", subcommand="serve"),
    ),
    # The scheduler loop's receive step (0.5: ``event_loop_*`` -> ``ingest_requests`` -> two
    # decorators -> ``recv_requests``): a sample caught entering it, in the decorators, polls.
    poll_frames=frozenset({"ingest_requests"}),
    # Its TP collectives (shared with vLLM's parallel_state, which SGLang vendors).
    frame_waits=(),
    startup_frames=(
        ("compiling", frozenset({"capture_cuda_graphs"})),
        ("warming up", frozenset({"warmup", "warm_up", "warmup_model"})),
    ),
    # "The server is fired up and ready to roll!"
    ready_lines=(r"ready to (?:roll|serve|accept|receive)",),
    # "Subprocess scheduler_1 (pid=N) crashed with exit code -9"
    death_rank_patterns=(r"\bscheduler_(\d+)\b",),
    clocks=(
        Clock(
            name="SGLang's watchdog",
            default_s=300.0,
            starts="step",
            action="kills",
            argv_flag="--watchdog-timeout",
            knob="`--watchdog-timeout`",
            during_startup=True,
            late_factor=1.5,
            implied=True,
            job_wide=True,
            # A scheduler's watchdog counts while ``cur_batch_for_debug`` is set or the
            # scheduler initializes (sglang/srt/managers/scheduler_components/
            # invariant_checker.py); back in ``event_loop_*`` it never fires.
            thread_of="scheduler",
            counts_in=frozenset(
                {"run_batch", "forward_batch_generation", "forward_batch_split_prefill", "forward"}
            ),
            idle_loop_prefix="event_loop",
            source="sglang 0.5 server_args.py (watchdog_timeout = 300)",
        ),
    ),
    sources=("sglang 0.5 sglang/srt/managers/scheduler.py, server_args.py",),
)
