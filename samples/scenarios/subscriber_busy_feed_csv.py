"""progressing: ``subscriber_busy_feed``'s consumer appending each tick's running average to a
CSV file - output that moves while its main thread blocks in ``recv`` between ticks."""

from __future__ import annotations

from subscriber_busy_feed import run

if __name__ == "__main__":
    run(csv=True)
