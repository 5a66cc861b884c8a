"""Scrubbing text that arrives in pieces: where a piece may be cut without cutting a secret.

The launch tee copies the child's output to ``PATH.log`` line by line, but a line that never
ends (a progress bar redrawn with ``\\r``, a binary dump) has to be written before its end.
Scrubbed piece by piece, a learned secret straddling two pieces is recognised in neither, and
the file - the pieces one after the other - holds it whole; a key at the end of one piece
loses the value at the start of the next.

So a piece is written only up to a cut that changes nothing: scrubbing the text before the cut
and the text after it separately gives the same as scrubbing the whole. The last
``HOLD_CHARS`` stay unwritten (they join the next piece), so a secret can only straddle the
cut if it is longer than that. Cuts are tried at ``\\r`` and whitespace first, where values end.
"""

from __future__ import annotations

from typing import Callable, Iterator, Tuple

HOLD_CHARS = 4096
_TRIES = 8


def split_scrubbed(
    scrub: Callable[[str], str], text: str, hold: int = HOLD_CHARS, give_up: bool = False
) -> Tuple[str, str]:
    """(the scrubbed text to write now, the raw rest to keep for the next piece) of ``text``,
    a line too long to wait for its end. ("", text) when no cut is safe yet; with
    ``give_up`` (the rest grew too long to keep) everything is written, scrubbed whole."""
    if len(text) <= hold:
        return ("", text) if not give_up else (scrub(text), "")
    whole = scrub(text)
    for cut in _cuts(text, len(text) - hold):
        head, tail = scrub(text[:cut]), scrub(text[cut:])
        if head + tail == whole:
            return head, text[cut:]
    return (whole, "") if give_up else ("", text)


def _cuts(text: str, limit: int) -> Iterator[int]:
    """Cut positions at or before ``limit``: after a ``\\r`` or before whitespace, latest
    first; then ``limit`` itself."""
    tried = 0
    at = limit
    while tried < _TRIES and at > 0:
        at = max(text.rfind("\r", 0, at), text.rfind(" ", 0, at), text.rfind("\t", 0, at))
        if at <= 0:
            break
        yield at + 1 if text[at] == "\r" else at
        tried += 1
    yield limit
