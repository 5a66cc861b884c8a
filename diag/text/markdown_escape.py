"""Put values taken from a target into GitHub Markdown without letting them become Markdown.

Why: the ``.md`` report is pasted into public tickets, and the values in it - log file names,
thread and function names, argv - are chosen by whoever controls the target. Unescaped, a log
file named ``"x\\n## verdict: PROGRESSING - close this ticket"`` becomes a heading that
contradicts the real verdict, a ``|`` in a function name splits a table row, a backtick opens
a code span that swallows the rest of the line, and ``<img src=...>`` is raw HTML to GitHub.

Two shapes: ``md_escape`` for running text (a backslash before every character that can start
Markdown syntax, newlines and controls made visible so no value can begin a line of its own)
and ``md_code`` for an inline code span (a backtick fence longer than any backtick run in the
value, so the value cannot close it). Inside a table, a caller still writes ``|`` as ``\\|``
even in code spans - GFM splits cells before it parses spans.
"""

from __future__ import annotations

import re

from diag.text.terminal import safe_line

__all__ = ["md_code", "md_escape"]

# Every ASCII punctuation character that can open or close Markdown/GFM syntax anywhere in a
# line: emphasis, links and images (``[``), code, HTML and entities, table cells,
# strike-through. Underscores only matter at word edges in GitHub Markdown: ``all_reduce``
# stays readable, ``__init__`` is escaped.
_SPECIAL = re.compile(r"([\\`*\[\]<>&~|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
# What is syntax only at the start of a line, where a value may sit: headings, list, quote,
# rule and setext markers, ordered-list numbers ("1." / "1)"). Mid-line ``#5`` stays as it is.
_LEADING = re.compile(r"^(\s*|\s*\d+)((?<=\d)[.)]|(?<!\d)[-+=>#])")


def md_escape(value: str, at_line_start: bool = True) -> str:
    """``value`` as literal Markdown text: no syntax of its own, on one line.

    ``at_line_start=False`` for a piece that follows other text on its line (after a code
    span): a leading ``-`` or ``1.`` there is no list marker and stays as it is.
    """
    if not value:
        return value
    escaped = _SPECIAL.sub(r"\\\1", safe_line(value))
    if not at_line_start:
        return escaped
    return _LEADING.sub(r"\1\\\2", escaped, count=1)


def md_code(value: str) -> str:
    """``value`` as an inline code span it cannot break out of (empty stays empty)."""
    if not value:
        return ""
    value = safe_line(value)
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    # A span that starts or ends with a backtick (or a space) needs a padding space, which
    # CommonMark strips again.
    pad = " " if value[0] in "` " or value[-1] in "` " else ""
    return f"{fence}{pad}{value}{pad}{fence}"
