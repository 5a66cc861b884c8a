"""slow: a start-up that builds a C extension the way torch's cpp_extension or inductor do -
one `gcc` after another, each living about half a second. The parent only waits in
``subprocess.run``; the CPU is in children no sample may catch alive, and it is the reaped
children's CPU (cutime) that shows the build goes on. Nothing is logged."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

# A unit that takes gcc -O2 a noticeable time: many small functions to optimise.
SOURCE = "\n".join(
    f"double f{i}(double x) {{ double s = 0; for (int k = 0; k < {i % 7 + 3}; k++) "
    f"s += x * k / (k + {i + 1}.0); return s; }}"
    for i in range(1500)
)


def build(workdir: Path, unit: int) -> None:
    src = workdir / f"unit{unit}.c"
    src.write_text(SOURCE + f"\nint unit{unit}(void) {{ return {unit}; }}\n")
    subprocess.run(["gcc", "-O2", "-c", str(src), "-o", str(workdir / f"unit{unit}.o")], check=True)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="diag-build-") as tmp:
        workdir = Path(tmp)
        build(workdir, 0)  # warm: the first compile also fills the page cache
        print("READY", flush=True)
        unit = 1
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            build(workdir, unit % 8)
            unit += 1
    sys.exit(0)


if __name__ == "__main__":
    main()
