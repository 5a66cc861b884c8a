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

import re
from typing import Callable, Iterator, List, Sequence, Set, Tuple

from diag.redaction.shapes import PLACEHOLDER

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


# -- secrets wrapped across lines -------------------------------------------------------------

# Characters of each line's edge joined with its neighbour's: a key and its value, or a token's
# two halves, lie within this much of the line break.
JOIN_WINDOW_CHARS = 160
# A token whose middle lines are all token (no space) continues this many lines at most.
MAX_JOINED_LINES = 4
# Lines few enough to look at break by break once their joined text is suspect.
_FEW_LINES = 8
# Lines of code under ``if secret_key:`` that are no value.
_CODE_LINES = frozenset(
    {"break", "continue", "pass", "return", "raise", "yield", "None", "True", "False", "..."}
)
# A line all token, and at least this long, is a wrapped token's middle (not a whole value).
_MIN_WRAPPED_CHARS = 20
_VALUE_HEAD_RE = re.compile(r"[^\s\"'\\<>,;]+")


def join_wrapped(
    wrapped: Callable[[str], str],
    paired: Callable[[str], str],
    lines: Sequence[str],
    whole: bool = False,
) -> List[str]:
    """``lines`` with every secret that spans a line break replaced in both lines.

    A log wraps a long token (``token: hf_abc`` / ``def...``) or prints a key and its value
    on two lines (``Authorization: Bearer`` / ``eyJ...``); scrubbed line by line, neither
    half is recognised. So each break is read joined within ``JOIN_WINDOW_CHARS`` of it:
    directly, by ``wrapped`` (a token's halves: learned values and token shapes only - a
    ``key=2`` at one line's end joined to the next line's word is not a secret), and with a
    space, by ``paired`` (a key at a line's end, its value the whole next line: every rule -
    not ``if token:`` and an indented line of code). What
    they replace there that the two edges scrubbed apart keep is replaced in the lines. A
    token wrapped at a fixed width through whole lines goes on into the next line's first
    word, up to ``MAX_JOINED_LINES``. Neither scrub may learn: the joined text is diag's.

    ``whole``: the lines will be scrubbed as one text (joined by newlines), not one by one.

    Cost: the text joined whole is scrubbed a few times first (``_suspect_breaks``); only
    the breaks it suspects are looked at one by one.
    """
    out = list(lines)
    if len(out) < 2:
        return out
    breaks = _suspect_breaks(wrapped, paired, out, 0, len(out), whole)
    carry = 0  # lines a token running through whole lines may still reach
    for i in range(len(out) - 1):
        nxt = out[i + 1]
        if carry:
            head = _VALUE_HEAD_RE.match(nxt)
            if head is not None:
                out[i + 1] = PLACEHOLDER + nxt[head.end() :]
                carry = carry - 1 if head.end() == len(nxt) == len(lines[i]) else 0
                continue
            carry = 0
        if i not in breaks:
            continue
        a, b, wrapped_on = _join_pair(wrapped, paired, out[i], nxt)
        out[i], out[i + 1] = a, b
        if wrapped_on and _full_width(lines[i], nxt):
            carry = MAX_JOINED_LINES - 2
    return out


def _full_width(line: str, nxt: str) -> bool:
    """``nxt`` is a wrapped token's middle: all token, as wide as the line before it."""
    return len(nxt) == len(line) >= _MIN_WRAPPED_CHARS and not any(c.isspace() for c in nxt)


def _suspect_breaks(
    wrapped: Callable[[str], str],
    paired: Callable[[str], str],
    lines: List[str],
    lo: int,
    hi: int,
    whole: bool,
) -> Set[int]:
    """The breaks (i: between line i and i+1) of ``lines[lo:hi]`` a secret may span: those
    lines joined scrub differently from the same lines scrubbed apart - one by one, or
    (``whole``) as one text joined by newlines, which no token shape crosses. Halved until
    a few lines are left, so a text's cost is a few whole scrubs of it, and one secret's
    only a few more."""
    if hi - lo < 2:
        return set()
    part = lines[lo:hi]
    if whole:
        apart_w = wrapped("\n".join(part)).split("\n")
        apart_p = paired("\n".join(part)).split("\n")
    else:
        apart_w = [wrapped(line) for line in part]
        apart_p = [paired(line) for line in part]
    same = len(apart_w) == len(part) == len(apart_p)
    if (
        same
        and wrapped("".join(part)) == "".join(apart_w)
        and paired(" ".join(part)) == " ".join(apart_p)
    ):
        return set()
    if hi - lo <= _FEW_LINES:
        return set(range(lo, hi - 1))
    mid = (lo + hi) // 2
    return _suspect_breaks(wrapped, paired, lines, lo, mid + 1, whole) | _suspect_breaks(
        wrapped, paired, lines, mid, hi, whole
    )


def _join_pair(
    wrapped: Callable[[str], str], paired: Callable[[str], str], a: str, b: str
) -> Tuple[str, str, bool]:
    """(a, b) with what spans their break replaced; whether a token wrapped from ``a`` ran
    through the whole of ``b``."""
    if not a or not b:
        return a, b, False
    edge_a, edge_b = a[-JOIN_WINDOW_CHARS:], b[:JOIN_WINDOW_CHARS]
    spaced = edge_a[-1].isspace() or edge_b[0].isspace()
    ways = [("", wrapped, True), ("" if spaced else " ", paired, False)]
    cut_a: List[Tuple[int, int]] = []
    cut_b: List[Tuple[int, int]] = []
    through = False
    for sep, scrub, wrap in ways:
        joined = edge_a + sep + edge_b
        scrubbed = scrub(joined)
        if scrubbed == joined or scrubbed == scrub(edge_a) + sep + scrub(edge_b):
            continue  # nothing, or each edge's own secrets: its line's scrub takes them
        b_at = len(edge_a) + len(sep)
        spans = _replaced(joined, scrubbed)
        if not wrap and not _whole_value_line(b, [(s - b_at, e - b_at) for s, e in spans]):
            continue  # ``if token:`` then an indented line of code: not a key and its value
        for start, end in spans:
            if start < len(edge_a):
                cut_a.append((start, min(end, len(edge_a))))
            if end > b_at:
                cut_b.append((max(start, b_at) - b_at, end - b_at))
                through = through or (wrap and start < len(edge_a) and end >= len(joined))
    if not cut_a and not cut_b:
        return a, b, False
    offset = len(a) - len(edge_a)
    new_a = _cut(a, [(s + offset, e + offset) for s, e in cut_a])
    return new_a, _cut(b, cut_b), through and len(b) <= JOIN_WINDOW_CHARS


def _whole_value_line(line: str, spans: List[Tuple[int, int]]) -> bool:
    """A key's value on the next line is that line, whole (``Bearer`` / ``eyJ...``,
    ``password:`` / ``    V``): the spans replace all of it but its indentation."""
    start, end = len(line) - len(line.lstrip()), len(line.rstrip())
    if end > JOIN_WINDOW_CHARS or start >= end or line[start:end] in _CODE_LINES:
        return False
    covered = [(max(s, start), min(e, end)) for s, e in spans if e > start and s < end]
    at = start
    for s, e in sorted(covered):
        if s > at:
            return False
        at = max(at, e)
    return at >= end


def _replaced(before: str, after: str) -> List[Tuple[int, int]]:
    """The spans of ``before`` that ``after`` replaced. A scrub only replaces spans by the
    placeholder (quotes and separators around it kept), so the text between placeholders is
    found in ``before`` in order: the first piece is its start, the last its end, each middle
    one the next occurrence past at least one replaced character. When that fails, the whole
    middle counts as replaced."""
    pieces = after.split(PLACEHOLDER)
    first, last = pieces[0], pieces[-1]
    if len(pieces) < 2 or not before.startswith(first) or not before.endswith(last):
        return [(0, len(before))] if before != after else []
    end_limit = len(before) - len(last)
    spans: List[Tuple[int, int]] = []
    at = len(first)
    for piece in pieces[1:-1]:
        found = before.find(piece, at + 1, end_limit) if piece else at + 1
        if found < 0 or found > end_limit:
            return [(len(first), end_limit)]
        spans.append((at, found))
        at = found + len(piece)
    if at >= end_limit:
        return [(len(first), end_limit)]
    spans.append((at, end_limit))
    return spans


def _cut(text: str, spans: List[Tuple[int, int]]) -> str:
    """``text`` with the (merged) ``spans`` each replaced by the placeholder."""
    merged: List[List[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in reversed(merged):
        text = text[:start] + PLACEHOLDER + text[end:]
    return text
