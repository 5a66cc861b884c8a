"""idle, the holder named with when it wakes: a worker of the job holds a cache's lock file
(``flock``) and sleeps an hour in ``time.sleep`` while holding it; its sibling blocks taking
the lock. The sentence says the holder wakes by itself in ~60 min (the kernel's deadline for
its sleep), so an hour's sleep with the lock held is told from a short pause. Contrast:
``flock_holder_computes`` (the holder builds the cache: slow)."""

from __future__ import annotations

import _flock_sibling

if __name__ == "__main__":
    _flock_sibling.run(sleeps=True)
