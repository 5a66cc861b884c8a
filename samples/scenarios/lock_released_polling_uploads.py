"""progressing: the contrast of ``lock_held_polling_uploads`` - the coordinator releases
``state_lock`` before it waits for the uploads, which record their results and finish."""

from __future__ import annotations

from lock_held_polling_uploads import run

if __name__ == "__main__":
    run(release=True)
