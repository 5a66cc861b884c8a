"""Scale sweep (issue 35): ``bench.scale``'s stories at several sizes, and the growth exponent.

Each (story, size) runs ``python -m bench.scale STORY --hosts H --threads T`` in a fresh
interpreter (its peak RSS is its own); with ``--old DIR`` the same command also runs with
``DIR`` first on ``PYTHONPATH`` (an older ``diag``, e.g. ``git archive COMMIT diag bench``),
old and new one after the other for each row, so a noisy machine slows both alike. The
exponent between two sizes is log(time ratio) / log(rank ratio): 1.0 grows with the job,
2.0 with its square.

    .venv/bin/python -m bench.scale_sweep --sizes 512:300,2048:300,8192:75 \\
        --stories healthy,diverged,missing,clock,straggler [--old /tmp/scale-old]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

Figures = Dict[str, float]


def one(story: str, hosts: int, threads: int, first: Optional[str] = None) -> Figures:
    """One story at one size, in a fresh interpreter; ``first``: a tree to import diag from."""
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (first, here) if p)
    cmd = [sys.executable, "-m", "bench.scale", story, "--hosts", str(hosts)]
    cmd += ["--threads", str(threads)]
    # ``-m`` puts the working directory first on sys.path: run from the tree to import.
    out = subprocess.run(
        cmd, env=env, capture_output=True, text=True, check=True, cwd=first or here
    )
    figures: Figures = json.loads(out.stdout)
    return figures


def exponent(a: Figures, b: Figures, what: str = "total_s") -> float:
    """How the time grew with the ranks between two sizes (1.0: linear)."""
    return math.log(b[what] / a[what]) / math.log(b["ranks"] / a["ranks"])


def line(story: str, f: Figures, old: Optional[Figures], grew: str) -> str:
    state = next((k[6:] for k in f if k.startswith("state_")), "?")
    text = (
        f"| {story}, {int(f['ranks']):,} ranks x {int(f['threads'])} threads x "
        f"{int(f['samples'])} samples | {f['total_s']:.2f} s (merge {f['merge_s']:.2f}, "
        f"classify {f['classify_s']:.2f}, render {f['render_s']:.2f}) | "
        f"{f['peak_rss_mib']:,.0f} MiB (before the merge {f['rss_inputs_mib']:,.0f}) | "
        f"{f['html_bytes'] / 1e6:.2f} MB | {state}, {int(f['suspects'])} suspect(s), named first: "
        f"{'yes' if f['suspect_in_banner'] and f['suspect_first_in_md'] else 'no'} | {grew} |"
    )
    if old is not None:
        old_state = next((k[6:] for k in old if k.startswith("state_")), "?")
        text += (
            f" {old['total_s']:.2f} s (classify {old['classify_s']:.2f}), "
            f"{old['peak_rss_mib']:,.0f} MiB, {old_state} |"
        )
    return text


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="512:300,2048:300", help="hosts:threads,...")
    parser.add_argument("--stories", default="healthy,diverged,missing,clock,straggler")
    parser.add_argument("--old", default="", help="a tree with an older diag to compare")
    args = parser.parse_args(argv)
    sizes: List[Tuple[int, int]] = [
        (int(h), int(t)) for h, t in (s.split(":") for s in args.sizes.split(","))
    ]
    head = "| story, size | merge + classify + render | peak RSS | HTML | verdict | exponent |"
    if args.old:
        head += " before (same run) |"
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for story in args.stories.split(","):
        previous: Optional[Figures] = None
        for hosts, threads in sizes:
            old = one(story, hosts, threads, args.old) if args.old else None
            new = one(story, hosts, threads)
            grew = f"{exponent(previous, new):.2f}" if previous is not None else ""
            print(line(story, new, old, grew), flush=True)
            previous = new
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
