"""torchrun / torch.distributed.elastic: the launcher agent that starts a node's ranks, joins
the rendezvous of the job's nodes and monitors its workers.

Facts from torch 2.6 torch/distributed/run.py and torch/distributed/elastic/agent/server/.
"""

from __future__ import annotations

from diag.frameworks.base import FrameSign, FrameWait, Pack

PACK = Pack(
    name="torchrun (torch.distributed.elastic)",
    key="torchrun",
    argv=("torchrun", "torch.distributed.run", "torch.distributed.launch"),
    modules=("torch/distributed/elastic/",),
    env=("TORCHELASTIC_",),
    launchers=frozenset({"torchrun"}),
    agent_argv=("torchrun", "torch.distributed.run", "torch.distributed.launch"),
    agent_options=(
        "nnodes",
        "rdzv_endpoint",
        "rdzv_id",
        "rdzv_backend",
        "master_addr",
        "master_port",
    ),
    agent_flags=frozenset({"standalone", "no_python", "run_path", "module", "m"}),
    frame_waits=(
        # The agent's monitor loop: it waits for its workers (children) to finish.
        FrameWait(
            FrameSign(
                frozenset({"_monitor_workers", "_invoke_run", "run", "monitor", "wait"}),
                (
                    "elastic/agent/server/api.py",
                    "local_elastic_agent.py",
                    "subprocess_handler.py",
                    "api.py",
                ),
            ),
            "child",
        ),
    ),
    sources=("torch 2.6 torch/distributed/run.py, elastic/agent/server/api.py",),
)
