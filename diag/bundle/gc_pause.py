"""Python's cycle collector paused while a big bundle is judged or rendered.

A merged bundle is millions of records held in tuples, and each full collection walks every
one of them (the tuples are tracked): at 4,096 ranks a full collection is ~0.5 s, at 16,384
about 2 s, and the verdict and the report each make enough short-lived objects to trigger
several - collections that find nothing, since neither builds cycles. Garbage a cycle holds
is still collected, once the collector is back.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off for the block, back as it was after (a caller that had it off keeps
    it off)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
