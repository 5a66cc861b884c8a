"""slow (the contrast of ``flock_holder_sleeps``): the holder of the cache's lock file builds
the cache in pure Python while its sibling blocks taking the lock."""

from __future__ import annotations

import _flock_sibling

if __name__ == "__main__":
    _flock_sibling.run(sleeps=False)
