"""Hugging Face accelerate: ``accelerate launch`` starts a node's ranks through torchrun's
machinery (its agent, its rendezvous), so torchrun's pack reads its waits.

Facts from accelerate 0.30-1.x (accelerate/commands/launch.py).
"""

from __future__ import annotations

from diag.frameworks.base import Pack

PACK = Pack(
    name="accelerate",
    key="accelerate",
    argv=("accelerate",),
    modules=("accelerate/",),
    env=("ACCELERATE_",),
    sources=("accelerate 1.0 accelerate/commands/launch.py",),
)
