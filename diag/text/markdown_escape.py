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

Some text is live on GitHub with every syntax character escaped: ``@team`` notifies the team
when the ticket is filed, and a bare ``https://...``, ``www.x.io`` or ``a@b.io`` becomes a link
(GitHub finds them in the text after backslashes are gone). ``md_escape`` writes each word that
holds one as an inline code span: visible as typed, never a link, never a notification.

``MarkdownText`` is the escaping of one document: each value passes the writer's scrubber (the
Redactor's ``scrub``, as every other output's text does) *before* it is escaped, because a
backslash put inside a secret (``p\\*ss``) is a spelling no later pass over the file knows.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from diag.text.terminal import safe_line

__all__ = ["MarkdownText", "md_code", "md_escape"]

# Every ASCII punctuation character that can open or close Markdown/GFM syntax anywhere in a
# line: emphasis, links and images (``[``), code, HTML and entities, table cells,
# strike-through. Underscores only matter at word edges in GitHub Markdown: ``all_reduce``
# stays readable, ``__init__`` is escaped.
_SPECIAL = re.compile(r"([\\`*\[\]<>&~|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
# What is syntax only at the start of a line, where a value may sit: headings, list, quote,
# rule and setext markers, ordered-list numbers ("1." / "1)"). Mid-line ``#5`` stays as it is.
_LEADING = re.compile(r"^(\s*|\s*\d+)((?<=\d)[.)]|(?<!\d)[-+=>#])")
# A word GitHub makes live whatever is escaped around it: a mention or an e-mail address (an
# ``@`` before a letter or digit), a URL (``scheme://``, ``mailto:``/``xmpp:``), a ``www.``
# address.
_LIVE = re.compile(r"@[A-Za-z0-9]|[A-Za-z0-9]:/{2}|\b(?:mailto|xmpp):|\bwww\.", re.I)
_WORDS = re.compile(r"(\s+)")


def md_escape(value: str, at_line_start: bool = True) -> str:
    """``value`` as literal Markdown text: no syntax of its own, on one line.

    ``at_line_start=False`` for a piece that follows other text on its line (after a code
    span): a leading ``-`` or ``1.`` there is no list marker and stays as it is.
    """
    if not value:
        return value
    value = safe_line(value)
    if _LIVE.search(value):
        words = _WORDS.split(value)
        escaped = "".join(
            w if i % 2 else md_code(w) if _LIVE.search(w) else _SPECIAL.sub(r"\\\1", w)
            for i, w in enumerate(words)
        )
    else:
        escaped = _SPECIAL.sub(r"\\\1", value)
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


class MarkdownText:
    """The escaping of one Markdown document, with its values scrubbed first (``scrub``: the
    capture's ``Redactor.scrub``, the same whole-text scrubber the HTML and JSON pass; None
    for text that holds no target value, as in tests of the escaping alone)."""

    _CODE_SPAN = re.compile(r"(`[^`]+`)")

    def __init__(self, scrub: Optional[Callable[[str], str]] = None) -> None:
        self._scrub = scrub

    def clean(self, value: str) -> str:
        """``value`` scrubbed: what every method here starts from."""
        return self._scrub(value) if self._scrub is not None and value else value

    def text(self, value: str) -> str:
        """Free text: syntax escaped outside its `code spans` (the verdict's sentences quote
        frames that way); a stray backtick is escaped, so it opens no span."""
        parts = self._CODE_SPAN.split(safe_line(self.clean(value)))
        return "".join(p if i % 2 else md_escape(p, i == 0) for i, p in enumerate(parts))

    def inline(self, value: str) -> str:
        """A value in the middle of a line (or a table cell): a leading ``1.`` or ``-`` left
        as it is (no list can start there)."""
        return md_escape(self.clean(value), at_line_start=False)

    def escape(self, value: str) -> str:
        """``md_escape`` of the scrubbed value (it may start a line)."""
        return md_escape(self.clean(value))

    def code(self, value: str) -> str:
        """An inline code span it cannot close early (empty stays empty)."""
        return md_code(self.clean(value))

    def verbatim(self, value: str) -> str:
        """One line of a fenced code block: scrubbed and one line (the fence is the caller's)."""
        return safe_line(self.clean(value))
