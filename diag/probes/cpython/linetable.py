"""The line number of an instruction, from a CPython 3.11+ location table (pure).

``co_linetable`` is a run of entries, each covering ``length`` code units: a first byte
``1cccclll`` (code, length - 1), then varints by code (CPython's Objects/locations.md):
15 no location, 14 long form (line delta, end line, two columns), 13 line delta only,
10-12 one-line form (line delta = code - 10, two column bytes), 0-9 short form (same line,
one column byte). Varints are 6-bit chunks, least significant first, 0x40 meaning "more";
a signed varint keeps its sign in bit 0.
"""

from __future__ import annotations

import functools
from typing import Optional, Tuple


def _varint(table: bytes, pos: int) -> Tuple[int, int]:
    value = 0
    shift = 0
    while pos < len(table):
        byte = table[pos]
        pos += 1
        value |= (byte & 0x3F) << shift
        shift += 6
        if not byte & 0x40:
            break
    return value, pos


def _svarint(table: bytes, pos: int) -> Tuple[int, int]:
    value, pos = _varint(table, pos)
    return (-(value >> 1) if value & 1 else value >> 1), pos


@functools.lru_cache(maxsize=8192)
def line_of(table: bytes, first_line: int, lasti: int) -> Optional[int]:
    """The line of code unit ``lasti`` (the first line for a frame that has not started yet).

    Scans from the start and stops at ``lasti``; remembered (by the table's bytes, not by an
    address): the ranks of a job run the same code and wait at the same few places.
    """
    if lasti < 0:
        return first_line
    line = first_line
    addr = 0
    pos = 0
    size = len(table)
    while pos < size:
        head = table[pos]
        pos += 1
        code = (head >> 3) & 0x0F
        end = addr + (head & 0x07) + 1
        if code == 15:
            pass  # no location: the line is unknown here, and unchanged for what follows
        elif code == 14:
            delta, pos = _svarint(table, pos)
            line += delta
            for _ in range(3):
                _, pos = _varint(table, pos)
        elif code == 13:
            delta, pos = _svarint(table, pos)
            line += delta
        elif code >= 10:
            line += code - 10
            pos += 2
        else:
            pos += 1
        if lasti < end:
            return None if code == 15 else line
        addr = end
    return None
