"""progressing: the contrast of ``store_host_crashed`` - rank 0, the c10d store's host, is
merely late: its launcher starts it a few seconds after ranks 1-2 (READY is printed while they
still wait to join), it comes up during the capture, and the three meet and train."""

from __future__ import annotations

from store_host_crashed import launch

if __name__ == "__main__":
    launch(late=True)
