"""deadlocked: real torchrun, 2 gloo ranks; someone left a ``breakpoint()`` in the code and rank 1
sits at the pdb prompt, reading a stdin no one types into (a terminal left open, as under ssh),
while rank 0 waits for it in ``all_reduce``. Nothing burns CPU and nothing is stopped; diag must
name rank 1's prompt - answer it (``c``) or kill the job and remove the breakpoint - not just
"rank 1 diverged"."""

from __future__ import annotations

import os
import time

import _torchrun


def train() -> None:
    import torch
    import torch.distributed as dist

    _torchrun.init()
    x = torch.ones(16)
    dist.all_reduce(x)  # the group works
    if _torchrun.rank() == 1:
        _torchrun.mark("pdb")
        breakpoint()  # left in by mistake
    else:
        _torchrun.mark("all_reduce")
    dist.all_reduce(x)


def silent_terminal() -> None:
    """Stdin becomes a pipe whose write end a process outside the job's tree holds and never
    writes to: a terminal nobody types in (the shell or sshd that holds a real one is outside
    the job too)."""
    read_fd, write_fd = os.pipe()
    if os.fork() == 0:
        if os.fork() == 0:  # double fork: reparented away from the job's tree
            os.close(read_fd)
            time.sleep(_torchrun.LIFETIME_S)
            os._exit(0)
        os._exit(0)
    os.wait()
    os.close(write_fd)
    os.dup2(read_fd, 0)
    os.close(read_fd)


if __name__ == "__main__":
    if _torchrun.is_rank():
        train()
    else:
        silent_terminal()
        _torchrun.launch(__file__, 2)
