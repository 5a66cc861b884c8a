"""Make text taken from a target safe to print on the terminal of the person running diag.

Why: diag runs as root and prints names a hostile or merely broken target controls - thread
names, process titles, log file names, function names in a verdict. A terminal acts on escape
sequences in what it is sent: OSC 52 writes the clipboard, OSC 0/2 retitles the window, CSI
sequences move the cursor and erase lines (so a forged ``verdict: PROGRESSING`` can overwrite
the real one), DCS reaches terminal-specific handlers, and 8-bit C1 bytes (0x80-0x9f) are the
same introducers in one byte. A lone CR or backspace rewrites what is already on screen.

How: every control character is rendered as a visible escape (``ESC`` -> ``\\x1b``, BEL ->
``\\x07``, U+009B -> ``\\x9b``) instead of being dropped. Escaping the introducer is enough to
defuse a whole sequence - a terminal only interprets bytes that follow an ESC/C1 introducer,
and what is left (``[2J``, ``]52;c;...``) is inert printable text - and keeping it visible
keeps the evidence: a reader sees that a thread name carried an escape sequence. Also escaped:
DEL, the Unicode line/paragraph separators, the bidirectional overrides and isolates (they
reorder what is displayed, "Trojan Source"), and the lone surrogates ``surrogateescape``
decoding leaves for undecodable bytes (``\\udcff`` -> ``\\xff``; writing them raw would raise
``UnicodeEncodeError`` on a UTF-8 stdout). Backslashes are left alone, so escaping twice
changes nothing: ``safe_text(safe_text(s)) == safe_text(s)``.
"""

from __future__ import annotations

import re

__all__ = ["safe_line", "safe_text"]

# C0 controls, DEL, C1 controls; Unicode line/paragraph separators; bidi embeddings,
# overrides and isolates; lone surrogates. \t and \n are handled by the callers' choice.
_FORMAT = r"\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f" + _FORMAT + "]")
_UNSAFE_LINE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f" + _FORMAT + "]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the undecodable byte it stands for
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def safe_text(text: str) -> str:
    """``text`` with every control character and escape-sequence introducer made visible.

    Newlines and tabs are kept (multi-line output such as ``diag summary``); everything else
    below U+0020, DEL, C1 (U+0080-U+009F), bidi controls and lone surrogates become
    ``\\xNN``/``\\uNNNN``.
    """
    if not text:
        return text
    return _UNSAFE.sub(_visible, text)


def safe_line(text: str) -> str:
    """Like ``safe_text`` for a one-line message (a status or verdict line): newlines too are
    shown as ``\\x0a``, so a value cannot start a forged line of its own."""
    if not text:
        return text
    return _UNSAFE_LINE.sub(_visible, text)
