"""Report scale: render time and file sizes of long bundles (synthetic, ``bench.synth``).

A 1-hour bundle (30 s interval, 8 ranks x 60 threads: 120 samples) and a 24-hour one (2,880
samples) of a job that trains and then deadlocks. Measured: building the view plus rendering
HTML and Markdown (what ``diag report`` and every ``diag watch`` refresh pay, without the
disk), the HTML/Markdown sizes, and the JSON bundle's size (``encode_bundle``, what
``diag capture`` writes) - the 24-hour bundle is what a ``diag watch`` journal turns into.
"""

from __future__ import annotations

import time
from typing import Dict, List

from bench.stats import collect
from bench.synth import make_bundle
from diag.bundle.io import encode_bundle
from diag.model import Bundle
from diag.render.html import render_html
from diag.render.markdown import render_markdown
from diag.render.outputs import view_of


def _render(bundle: Bundle) -> Dict[str, int]:
    view = view_of(bundle)
    return {
        "html_bytes": len(render_html(view).encode("utf-8")),
        "md_bytes": len(render_markdown(view).encode("utf-8")),
    }


def measure(samples: int, ranks: int = 8, threads: int = 60, repeats: int = 5) -> Dict[str, float]:
    """Render seconds (median, min over ``repeats``) and output sizes of one bundle."""
    bundle = make_bundle(ranks=ranks, threads=threads, samples=samples, interval_s=30.0)
    _render(bundle)  # the first render compiles the template (cached per user after that)
    times: List[float] = []
    sizes: Dict[str, int] = {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        sizes = _render(bundle)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    json_bytes = len(encode_bundle(bundle))
    encode_s = time.perf_counter() - t0
    series = collect(times)
    return {
        "samples": float(samples),
        "hours": samples * 30.0 / 3600,
        "render_median_s": series.median,
        "render_min_s": series.min,
        "html_bytes": float(sizes["html_bytes"]),
        "md_bytes": float(sizes["md_bytes"]),
        "json_bytes": float(json_bytes),
        "json_encode_s": encode_s,
    }


if __name__ == "__main__":
    import sys

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 120
    for key, value in measure(n, repeats=3).items():
        print(f"{key:<18} {value:,.4f}")
