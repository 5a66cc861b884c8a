"""slow: a Python job compressing a checkpoint through a non-Python child (``gzip -9`` fed by
a pipe): the parent waits in ``subprocess.run``, the child burns a core - busy, not hung."""

from __future__ import annotations

import subprocess


def compress_checkpoint() -> None:
    # 64 GB of incompressible "checkpoint": gzip -9 takes far longer than any capture.
    subprocess.run(
        ["sh", "-c", "echo READY; head -c 64G /dev/urandom | gzip -9 > /dev/null"], check=True
    )


if __name__ == "__main__":
    compress_checkpoint()
