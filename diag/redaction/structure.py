"""Redaction by structure: secrets found by the shape of what holds them, before any pattern.

Free-text patterns see one token at a time; some credentials are only recognisable from the
structure around them:

- an argv rendered as a list - Python's ``['tool', '--api-key', 'V']`` in a traceback, JSON's
  ``["--password", "V"]`` (also JSON-escaped inside a JSON string), a pretty-printed JSON or a
  YAML ``args:`` list over several lines: the items are read back into an argv and judged by
  ``diag.redaction.argv`` (the same rules as a process's own argv), so the flag and its value
  need not sit on the same line or be joined by ``=``;
- netrc's ``machine H login U password V`` (one line or one token a line), whose password
  has no ``=`` or ``:`` before it.

Each item's secret is replaced in place (quotes, commas and brackets stay, so JSON stays
JSON) and handed to ``learn``, so the same value is scrubbed wherever else it appears.
"""

from __future__ import annotations

import re
from typing import Callable, List, Sequence, Tuple

from diag.redaction.argv import argv_secrets
from diag.redaction.patterns import PLACEHOLDER, is_secret_flag

Learn = Callable[[str], None]

# One list item, in the three spellings diag meets: JSON-escaped inside a JSON string
# (``\"V\"``), double-quoted, single-quoted (Python's repr). Group 1/2/3: its text.
_ITEM_RE = re.compile(
    r"\\\"([^\"\\\n]*(?:\\\\[^\"\n][^\"\\\n]*)*)\\\""
    r'|"([^"\\\n]*(?:\\.[^"\\\n]*)*)"'
    r"|'([^'\\\n]*(?:\\.[^'\\\n]*)*)'"
)
# A list of two or more quoted items, found by one regex (a Python loop per item cost 8 ms
# per 400 kB bundle); ``_items`` then reads the items of that span only.
_LIST_RE = re.compile(
    r"\[\s*(?:(?:" + _ITEM_RE.pattern + r")\s*,\s*)+(?:" + _ITEM_RE.pattern + r")"
)
# YAML block list items, one a line: ``- --api-key`` then ``- VALUE``.
_YAML_ITEM_RE = re.compile(r"[ \t]*-[ \t]+([\"']?)([^\s\"'#][^\n\"'#]*?)\1[ \t]*\r?")
# JSON pretty-printed list item, one a line: ``"--api-key",``.
_JSON_ITEM_RE = re.compile(r"[ \t]*\"((?:[^\"\\\n]|\\.)*)\"[ \t]*,?[ \t]*\r?")
# A line that is one flag item of a YAML or pretty JSON list, followed by another line: the
# only texts worth splitting into lines for the two item-a-line passes.
_YAML_FLAG_NEEDLE = re.compile(r"(?m)^[ \t]*-[ \t]+[\"']?--?[A-Za-z][^\n]*\n")
_JSON_FLAG_NEEDLE = re.compile(r"(?m)^[ \t]*\"--?[A-Za-z][^\"\n]*\"[ \t]*,?[ \t]*\r?\n")
# netrc: ``[machine H] [login U] password V`` on one line, or ``password V`` alone. Matched
# from the keyword (a literal: the scan jumps between them); what precedes it on its line is
# checked by ``_netrc_sub``. A line starts at a newline, or at a JSON-escaped one or a quote
# inside a JSON string (the last pass over a file sees those), and ends likewise.
_NETRC_RE = re.compile(
    r"(pass(?:wor)?d[ \t]+)([^\s\\\"']+)([ \t]*\r?)(?=$|\\[nr]|[\"'])", re.MULTILINE
)
_NETRC_BEFORE_RE = re.compile(
    r"[ \t]*((?:(?:machine|login|account|macdef)[ \t]+[^\s\\\"']+[ \t]+|default[ \t]+)*)"
)
_PLAIN_WORD_RE = re.compile(r"[a-z]+[.:!]?")


def scrub_structures(text: str, learn: Learn) -> str:
    """``text`` with the secrets of argv lists and netrc lines replaced (and learned)."""
    if "[" in text:
        text = _scrub_lists(text, learn)
    if "\n" in text and _YAML_FLAG_NEEDLE.search(text):
        text = "\n".join(_scrub_line_lists(text.split("\n"), learn, _YAML_ITEM_RE, 2))
    if "\n" in text and _JSON_FLAG_NEEDLE.search(text):
        text = "\n".join(_scrub_line_lists(text.split("\n"), learn, _JSON_ITEM_RE, 1))
    if "password" in text or "passwd" in text:
        text = _NETRC_RE.sub(lambda m: _netrc_sub(m, learn), text)
    return text


def scrub_item_lines(lines: Sequence[str], learn: Learn) -> List[str]:
    """A log's consecutive lines, where a YAML or pretty JSON argv list has one item a line."""
    out = _scrub_line_lists(list(lines), learn, _YAML_ITEM_RE, 2)
    return _scrub_line_lists(out, learn, _JSON_ITEM_RE, 1)


def _scrub_lists(text: str, learn: Learn) -> str:
    out: List[str] = []
    done = 0
    pos = 0
    while True:
        found = _LIST_RE.search(text, pos)
        if found is None:
            break
        pos = found.start() + 1  # a list inside an item (JSON in a JSON string) is read too
        items = [item for item in _items(text, pos, found.end()) if item[0] >= done]
        values = [value for _, _, value in items]
        if not any(v[:1] == "-" or "=" in v or ":" in v or v == "login" for v in values):
            continue  # no flag, pair, header, user:pw or ``login KEY``: nothing to judge
        for index, offset in sorted(argv_secrets(values).items()):
            item_start, item_end, value = items[index]
            secret = value[offset:]
            if not secret or PLACEHOLDER in secret:
                continue
            learn(secret)
            out += (text[done : item_start + offset], PLACEHOLDER)
            done = item_end
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _items(text: str, start: int, end: int) -> List[Tuple[int, int, str]]:
    """(start, end, text) of each quoted item of the list ``text[start:end]``, the item's
    text only (its quotes excluded)."""
    items: List[Tuple[int, int, str]] = []
    for m in _ITEM_RE.finditer(text, start, end):
        group = 1 if m.group(1) is not None else 2 if m.group(2) is not None else 3
        items.append((m.start(group), m.end(group), m.group(group)))
    return items


def _scrub_line_lists(
    lines: List[str], learn: Learn, item_re: re.Pattern[str], g: int
) -> List[str]:
    """Consecutive lines that are each one list item: a secret flag's next item is its value."""
    flag_before = False
    for i, line in enumerate(lines):
        m = item_re.fullmatch(line)
        if m is None:
            flag_before = False
            continue
        value = m.group(g)
        if flag_before and not value.startswith("-") and PLACEHOLDER not in value:
            learn(value)
            lines[i] = line[: m.start(g)] + PLACEHOLDER + line[m.end(g) :]
        flag_before = value.startswith("-") and "=" not in value and is_secret_flag(value)
    return lines


def _netrc_sub(m: re.Match[str], learn: Learn) -> str:
    text, at = m.string, m.start()
    escaped = text.rfind("\\n", 0, at)
    line_start = max(
        text.rfind("\n", 0, at) + 1,
        escaped + 2 if escaped >= 0 else 0,
        text.rfind('"', 0, at) + 1,
        text.rfind("'", 0, at) + 1,
    )
    before = _NETRC_BEFORE_RE.fullmatch(text, line_start, at)
    value = m.group(2)
    if before is None or PLACEHOLDER in value:
        return m.group(0)
    if not before.group(1) and _PLAIN_WORD_RE.fullmatch(value):
        return m.group(0)  # "password changed": prose, not a netrc line
    learn(value)
    return m.group(1) + PLACEHOLDER + m.group(3)
