"""DeepSpeed: its launcher (``deepspeed``), and its ``comm`` package, whose collectives wrap
torch.distributed's.

Facts from deepspeed 0.14-0.16 (deepspeed/comm/comm.py, deepspeed/launcher/runner.py).
"""

from __future__ import annotations

from diag.frameworks.base import Clock, Pack

PACK = Pack(
    name="DeepSpeed",
    key="deepspeed",
    argv=("deepspeed",),
    modules=("deepspeed/",),
    # ``deepspeed.comm.barrier``/``all_reduce``: a bare collective name in an installed
    # ``comm`` package waits on peers.
    comm_dirs=("/comm/",),
    # ``deepspeed.init_distributed(timeout=default_pg_timeout)``: DeepSpeed's own default for
    # the process group's timeout, in minutes from ``DEEPSPEED_TIMEOUT`` (deepspeed/constants.py;
    # 30 when unset, torch's own default). A collective waiting that long fails its rank.
    clocks=(
        Clock(
            name="DeepSpeed's process-group timeout",
            default_s=1800.0,
            starts="collective",
            action="aborts",
            env="DEEPSPEED_TIMEOUT",
            env_scale=60.0,
            knob="`DEEPSPEED_TIMEOUT` (min)",
            thread_prefixes=("pt_gloo_runloop", "gloo_tcp_loop", "pt_nccl_watchdg"),
            source="deepspeed 0.16 deepspeed/constants.py (default_pg_timeout, DEEPSPEED_TIMEOUT)",
        ),
    ),
    sources=("deepspeed 0.16 deepspeed/comm/comm.py, deepspeed/constants.py",),
)
