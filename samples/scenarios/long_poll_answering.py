"""progressing: the contrast of ``long_poll_waiting`` - an event every 0.3 s: each long poll
is answered and re-sent at once."""

from __future__ import annotations

from long_poll_waiting import run

if __name__ == "__main__":
    run(events_on=True)
