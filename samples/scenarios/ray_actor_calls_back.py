"""progressing: the contrast of ``ray_actor_cycle`` - the same two actors calling each other,
``A`` able to run two calls at once: ``A.back`` runs beside the ``A.ping`` that waits for it,
and the driver's loop makes round trip after round trip, a line every 20."""

from __future__ import annotations

from ray_actor_cycle import run

if __name__ == "__main__":
    run(2)
