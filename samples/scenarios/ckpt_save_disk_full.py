"""slow, not "progressing: pid N keeps writing output (1.0 MiB in 4.0 s)": a trainer saves a
4 MiB checkpoint to a 1 MiB filesystem every 3 s; each try writes 1 MiB before the kernel
refuses ("[Errno 28] No space left on device") and the log says only that, retrying for ever.
The bytes written are what the full disk would not keep; freeing space is the remedy, and
killing it would lose the state it tries to save. Contrast: ``ckpt_save_disk_room`` (64 MiB:
every save succeeds, progressing)."""

from __future__ import annotations

import _ckpt_saver

if __name__ == "__main__":
    _ckpt_saver.run(size_mib=1)
