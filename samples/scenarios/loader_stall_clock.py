"""deadlocked, not "progressing: log loader.log grew 1 lines": a consumer polls a
``multiprocessing.Queue`` whose producer process was SIGKILLed (the OOM killer's way, a zombie
never reaped) and logs every 5 s how long it has had no batch ("no batch for 20 s", "... 25 s").
The only moving number of those lines is a duration that grows with the clock: time passing,
not work. Contrast: ``loader_steady_batches`` (the producer lives: "got a batch after 2.0 s")."""

from __future__ import annotations

import _stall_loader

if __name__ == "__main__":
    _stall_loader.run(killed=True)
