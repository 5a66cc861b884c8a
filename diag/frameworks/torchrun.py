"""torchrun / torch.distributed.elastic: the launcher agent that starts a node's ranks, joins
the rendezvous of the job's nodes and monitors its workers.

Facts from torch 2.6 torch/distributed/run.py and torch/distributed/elastic/agent/server/.
"""

from __future__ import annotations

from diag.frameworks.base import AgentOptions, Clock, FrameSign, FrameWait, Pack

PACK = Pack(
    name="torchrun (torch.distributed.elastic)",
    key="torchrun",
    argv=("torchrun", "torch.distributed.run", "torch.distributed.launch"),
    modules=("torch/distributed/elastic/",),
    env=("TORCHELASTIC_",),
    launchers=frozenset({"torchrun"}),
    agent_argv=("torchrun", "torch.distributed.run", "torch.distributed.launch"),
    agent_options=AgentOptions(
        nodes="nnodes",
        endpoint="rdzv_endpoint",
        run_id="rdzv_id",
        backend="rdzv_backend",
        static_host="master_addr",
        static_port="master_port",
        default_port="29500",  # torch/distributed/run.py: --master-port's default
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
    # The rendezvous of the job's nodes (``--rdzv-conf k=v,...``, either spelling; torch 2.13
    # elastic/rendezvous/dynamic_rendezvous.py RendezvousTimeout._DEFAULT_TIMEOUTS): each
    # agent's join counts from its start (or a restart's new round) and fails the agent
    # (RendezvousTimeoutError) when too few nodes came; once ``--nnodes`` MIN joined, the last
    # call waits for the rest up to MAX, then starts the job without them.
    clocks=(
        Clock(
            name="torchrun's rendezvous join timeout",
            default_s=600.0,
            starts="join",
            action="fails_startup",
            argv_flag="--rdzv-conf",
            argv_key="join_timeout",
            knob="`--rdzv-conf join_timeout=`",
            during_startup=True,
            implied=True,
            source="torch 2.13 elastic/rendezvous/dynamic_rendezvous.py (join: 600 s)",
        ),
        Clock(
            name="torchrun's rendezvous last call",
            default_s=30.0,
            starts="join",
            action="proceeds",
            argv_flag="--rdzv-conf",
            argv_key="last_call_timeout",
            knob="`--rdzv-conf last_call_timeout=`",
            during_startup=True,
            source="torch 2.13 elastic/rendezvous/dynamic_rendezvous.py (last_call: 30 s)",
        ),
    ),
    sources=(
        "torch 2.6 torch/distributed/run.py, elastic/agent/server/api.py",
        "torch 2.13 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, utils.py",
    ),
)
