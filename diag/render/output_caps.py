"""The size caps of the files a capture writes (issue #25): PATH.json and PATH.html.

Why on top of the stack budget (``diag.bundle.stack_budget``): that bounds what the collector
keeps, but a bundle merged from many hosts, or rendered with a thread table per rank, can
still grow past what a browser opens or a ticket takes. So each output has a cap -
MAX_JSON_BYTES and MAX_HTML_BYTES - and one that comes out over it is made again from the
bundle with its stacks cut shorter (the innermost frames, where a thread waits, stay) until it
fits; what was cut is recorded in the bundle's failures, which the report lists. A file still
over its cap after the last step is written as it is, and that is recorded too.
"""

from __future__ import annotations

from typing import Callable, Tuple

import msgspec

from diag.bundle.stack_budget import budget_bytes, cut_all
from diag.model import Bundle, ProbeFailure

MAX_JSON_BYTES = 64 << 20
MAX_HTML_BYTES = 32 << 20
# Each step keeps this many innermost frames of every stack.
_STEPS = (32, 8, 1)


def json_cap_bytes() -> int:
    return budget_bytes("DIAG_MAX_JSON_BYTES", MAX_JSON_BYTES)


def html_cap_bytes() -> int:
    return budget_bytes("DIAG_MAX_HTML_BYTES", MAX_HTML_BYTES)


def fit(
    bundle: Bundle, render: Callable[[Bundle], bytes], cap_bytes: int, what: str
) -> Tuple[Bundle, bytes]:
    """``render(bundle)`` under ``cap_bytes``: the bundle (its stacks cut as needed, the cut
    recorded in its failures) and the bytes rendered from it."""
    data = render(bundle)
    if len(data) <= cap_bytes:
        return bundle, data
    first = len(data)
    for keep in _STEPS:
        stacks, n = cut_all(bundle.stacks, keep, f"{what} over its cap")
        note = ProbeFailure(
            probe="output",
            reason=(
                f"truncated: {what} came to {first:,} bytes, over its cap of {cap_bytes:,}: "
                f"{n} stacks cut to their innermost {keep} frames (the rest not shown)"
            ),
            host=bundle.host.hostname,
        )
        smaller = msgspec.structs.replace(bundle, stacks=stacks, failures=(*bundle.failures, note))
        data = render(smaller)
        if len(data) <= cap_bytes:
            return smaller, data
    note = ProbeFailure(
        probe="output",
        reason=f"{what} is {len(data):,} bytes, over its cap of {cap_bytes:,} even with every "
        f"stack cut to {_STEPS[-1]} frame(s)",
        host=bundle.host.hostname,
    )
    smaller = msgspec.structs.replace(smaller, failures=(*smaller.failures, note))
    return smaller, render(smaller)
