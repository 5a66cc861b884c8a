"""progressing (the contrast of ``loader_stall_clock``): the same consumer and producer, the
producer alive and putting a batch every 2 s - the consumer logs "got a batch after 2.0 s"
for each: a duration that does not follow the clock, on a line that reports a batch that came."""

from __future__ import annotations

import _stall_loader

if __name__ == "__main__":
    _stall_loader.run(killed=False)
