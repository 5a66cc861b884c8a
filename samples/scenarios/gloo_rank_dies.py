"""deadlocked: rank 2 crashes while loading (exit code 3) and is left a zombie; ranks 0 and 1
wait for it in init_process_group's rendezvous, forever."""

from __future__ import annotations

import sys

import _gloo

WORLD_SIZE = 3


def load_checkpoint() -> None:
    _gloo.mark("crashing")
    sys.exit(3)  # e.g. a corrupt shard


def main() -> None:
    import torch.distributed  # noqa: F401  (loaded before the rendezvous, as in any job)

    if _gloo.rank() == 2:
        load_checkpoint()
    _gloo.mark("rendezvous")
    _gloo.init()


if __name__ == "__main__":
    if _gloo.rank() is None:
        _gloo.launch(__file__, WORLD_SIZE, wait_dead=True)
    else:
        main()
