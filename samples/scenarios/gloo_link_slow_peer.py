"""slow|deadlocked: the contrast of ``gloo_link_cut`` - the same two ranks over the same veth
link, which stays up; rank 1 sleeps 60 s in its own code while rank 0 waits in ``all_reduce``.
Nothing is in flight: the link is quiet, not dead, and no dead link may be read."""

from __future__ import annotations

from gloo_link_cut import run

if __name__ == "__main__":
    run(cut=False)
