"""The size caps of the files a capture writes (issue #25): PATH.json, PATH.html, PATH.md.

Why on top of the stack budget (``diag.bundle.stack_budget``): that bounds what the collector
keeps, but a bundle merged from many hosts, or rendered with a thread table per rank, can
still grow past what a browser opens or a ticket takes. So each output has a cap -
MAX_JSON_BYTES and MAX_HTML_BYTES - and one that comes out over it is made again from the
bundle with its stacks cut shorter (the innermost frames, where a thread waits, stay) until it
fits; what was cut is recorded in the bundle's failures, which the report lists. A file still
over its cap after the last step is written as it is, and that is recorded too.

The Markdown is for a bug ticket (GitHub takes 65,536 characters): it is short by design (the
verdict, the suspects, a few rows), and a target that shapes it long (thousands of ranks with
5,000-character frame names) gets it cut at a line, under MAX_MD_BYTES, with a last line
saying so and where the whole report is.
"""

from __future__ import annotations

from typing import Callable, Tuple

import msgspec

from diag.bundle.stack_budget import budget_bytes, cut_all
from diag.model import Bundle, ProbeFailure

MAX_JSON_BYTES = 64 << 20
MAX_HTML_BYTES = 32 << 20
MAX_MD_BYTES = 256 << 10
# Each step keeps this many innermost frames of every stack.
_STEPS = (32, 8, 1)


def json_cap_bytes() -> int:
    return budget_bytes("DIAG_MAX_JSON_BYTES", MAX_JSON_BYTES)


def html_cap_bytes() -> int:
    return budget_bytes("DIAG_MAX_HTML_BYTES", MAX_HTML_BYTES)


def md_cap_bytes() -> int:
    return budget_bytes("DIAG_MAX_MD_BYTES", MAX_MD_BYTES)


def cut_text(data: bytes, cap_bytes: int, whole: str) -> bytes:
    """``data`` (UTF-8 text) under ``cap_bytes``: cut after its last whole line that fits,
    then a line saying so and naming ``whole``, where everything is."""
    if len(data) <= cap_bytes:
        return data
    note = f"\n_(cut at {cap_bytes:,} bytes of {len(data):,}: the whole report is {whole})_\n"
    room = max(0, cap_bytes - len(note.encode("utf-8")))
    end = data.rfind(b"\n", 0, room)
    return data[: end + 1 if end >= 0 else 0] + note.encode("utf-8")


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
