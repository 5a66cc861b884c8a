"""DeepSpeed: its launcher (``deepspeed``), and its ``comm`` package, whose collectives wrap
torch.distributed's.

Facts from deepspeed 0.14-0.16 (deepspeed/comm/comm.py, deepspeed/launcher/runner.py).
"""

from __future__ import annotations

from diag.frameworks.base import Pack

PACK = Pack(
    name="DeepSpeed",
    key="deepspeed",
    argv=("deepspeed",),
    modules=("deepspeed/",),
    # ``deepspeed.comm.barrier``/``all_reduce``: a bare collective name in an installed
    # ``comm`` package waits on peers.
    comm_dirs=("/comm/",),
    sources=("deepspeed 0.16 deepspeed/comm/comm.py",),
)
