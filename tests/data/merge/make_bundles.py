"""Re-record the two-host bundles the merge tests read (run from the repo root, as root).

Two real captures (``diag capture --pid``, real py-spy, real /proc) of ``tests/slurm/rank.py``
running as rank 0 and rank 1, relabelled as hosts ``node-a`` and ``node-b``. node-b's clock is
made to run 3.5 s ahead (every timestamp shifted) so the tests can check the skew is shown.

    .venv/bin/python tests/data/merge/make_bundles.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec

from diag.bundle.io import load_bundle, write_bundle
from diag.model import Bundle

HERE = Path(__file__).resolve().parent
RANK = HERE.parent.parent / "slurm" / "rank.py"
SKEW_S = {"node-a": 0.0, "node-b": 3.5}


def shifted(bundle: Bundle, host: str, skew_s: float) -> Bundle:
    samples = tuple(
        msgspec.structs.replace(
            s,
            t_s=s.t_s + skew_s,
            processes=tuple(msgspec.structs.replace(p, t_s=p.t_s + skew_s) for p in s.processes),
        )
        for s in bundle.samples
    )
    info = msgspec.structs.replace(bundle.host, hostname=host)
    return msgspec.structs.replace(
        bundle, host=info, samples=samples, created_s=bundle.created_s + skew_s
    )


def main() -> None:
    for rank, host in enumerate(SKEW_S):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(
            [sys.executable, str(RANK)], env=env, stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout is not None and "READY" in proc.stdout.readline()
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "b.json"
                subprocess.run(
                    [sys.executable, "-m", "diag", "capture", "--pid", str(proc.pid),
                     "--count", "3", "--interval", "0.5", "-o", str(out)],
                    check=True,
                )  # fmt: skip
                bundle = shifted(load_bundle(out), host, SKEW_S[host])
            write_bundle(bundle, HERE / f"{host}.json")
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
