"""progressing (the contrast of ``ckpt_save_disk_full``): the same trainer and saver on a
64 MiB filesystem - every save succeeds and is logged ("saved checkpoint step N")."""

from __future__ import annotations

import _ckpt_saver

if __name__ == "__main__":
    _ckpt_saver.run(size_mib=64)
