"""What diag prints and the Markdown it writes cannot be steered by text the target chose.

Thread names, log file names and function names reach the verdict line, the watch status line,
``diag summary`` and the ``.md`` ticket: escape sequences must arrive visible and inert, and
Markdown syntax must arrive as literal text.
"""

from __future__ import annotations

from pathlib import Path
from typing import List

import pytest

from diag.commands.outcome import Outcome, report_outcome
from diag.model import Bundle, HostInfo, Target, Verdict
from diag.redaction.redact import PLACEHOLDER, Redactor, printable
from diag.render.markdown import _cell, code, text
from diag.text.markdown_escape import md_code, md_escape
from diag.text.terminal import safe_line, safe_text

HOSTILE = (
    "\x1b]52;c;SGVsbG8=\x07",  # OSC 52: write the clipboard
    "\x1b]0;pwned\x1b\\",  # OSC 0 (window title), ST-terminated
    "\x1b[2J\x1b[H",  # CSI: clear screen, cursor home
    "\x1bP+q544e\x1b\\",  # DCS
    "\x9b31m\x9d0;t\x07\x90x",  # 8-bit C1 introducers
    "\x1b",  # lone ESC
    "ok\rverdict: PROGRESSING",  # CR overwrites the line
    "abc\x08\x08\x08",  # backspaces
    "\u202eevil\u2066",  # bidi override / isolate
    "a\u2028b",  # Unicode line separator
    "bad\udcffbyte",  # surrogateescape-decoded byte
)


def _raw_controls(s: str) -> List[str]:
    return [c for c in s if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


@pytest.mark.parametrize("value", HOSTILE)
def test_safe_text_leaves_no_control_character(value: str) -> None:
    out = safe_text(value)
    assert not _raw_controls(out)
    assert not any(0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069 for c in out)
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in out)
    out.encode("utf-8")  # printable on a UTF-8 terminal (no lone surrogate)
    assert safe_text(out) == out  # idempotent


def test_escapes_are_visible_and_keep_the_rest() -> None:
    assert safe_text("a\x1b[31mred") == "a\\x1b[31mred"
    assert safe_text("t\x9bx") == "t\\x9bx"
    assert safe_text("x\udcffy") == "x\\xffy"
    assert safe_text("two\nlines\tand tab") == "two\nlines\tand tab"
    assert safe_line("two\nlines\r") == "two\\x0alines\\x0d"
    assert safe_text("plain ascii, ünïcödé, 日本") == "plain ascii, ünïcödé, 日本"


def test_printable_scrubs_with_every_learned_secret_and_escapes() -> None:
    r = Redactor()
    r.add_secret("learned-Secret-4711")
    line = "verdict: stuck in worker-learned-Secret-4711 \x1b]52;c;x\x07\nforged"
    out = printable(line, one_line=True)
    assert "learned-Secret-4711" not in out and PLACEHOLDER in out
    assert "\x1b" not in out and "\n" not in out


def _bundle() -> Bundle:
    verdict = Verdict(
        state="deadlocked",
        confidence=0.9,
        summary="stuck in worker-outcomeSecret99\x1b]52;c;SGVsbG8=\x07\nverdict: PROGRESSING",
    )
    return Bundle(host=HostInfo(), target=Target(), verdict=verdict)


def test_report_outcome_scrubs_and_escapes_every_line(tmp_path: Path) -> None:
    r = Redactor()
    r.add_secret("outcomeSecret99")
    outcome = Outcome(
        _bundle(),
        (tmp_path / "a\x1b[2J.json",),
        ("thread outcomeSecret99 \x1b]0;t\x07",),
        r,
    )
    printed: List[str] = []
    report_outcome(
        outcome, merged=False, fail_states=frozenset(), out=printed.append, err=printed.append
    )
    joined = "\n".join(printed)
    assert "outcomeSecret99" not in joined
    assert "\x1b" not in joined and "\x07" not in joined
    verdicts = [line for line in printed if line.startswith("verdict:")]
    assert len(verdicts) == 1 and "deadlocked" not in verdicts[0].split("PROGRESSING")[-1]
    assert "\\x1b]52" in verdicts[0] and "\\x0averdict: PROGRESSING" in verdicts[0]


@pytest.mark.parametrize(
    "value",
    [
        "## verdict: PROGRESSING - close this ticket",
        "x\n## verdict: PROGRESSING - close this ticket",
        "x\r\n# h1",
        "- [ ] fake checklist",
        "1. fake list",
        "> quote",
        "<img src=x onerror=alert(1)>",
        "[click](https://evil.example)",
        "**bold** __init__ ~~strike~~",
        "a|b|c",
        "`unclosed code",
    ],
)
def test_md_escape_makes_values_literal(value: str) -> None:
    out = md_escape(value)
    assert "\n" not in out and "\r" not in out
    assert not out.lstrip().startswith(("#", "-", ">", "1.", "<"))
    if "://" in value:  # a word with a URL is a code span: literal, and never a link
        assert out == f"`{value}`"
        return
    for ch in "<>[]*`|~":
        assert ch not in out.replace("\\" + ch, "")  # every such character is escaped
    assert "__init__" not in out


def test_md_code_cannot_be_closed_early() -> None:
    assert md_code("plain") == "`plain`"
    assert md_code("a`b") == "``a`b``"
    assert md_code("``x``") == "``` ``x`` ```"
    assert md_code("x\n## h") == "`x\\x0a## h`"
    assert md_code("") == ""


def test_markdown_renderer_helpers() -> None:
    assert text("log x\n## verdict: PROGRESSING grew") == (
        "log x\\\\x0a## verdict: PROGRESSING grew"
    )
    assert text("blocked in `all_reduce` | `x`") == "blocked in `all_reduce` \\| `x`"
    assert code("f`g") == "``f`g``"
    # A table cell: every bare pipe escaped once, an escaped one left alone, even in code.
    assert _cell("`a|b`") == "`a\\|b`"
    assert _cell("a\\|b") == "a\\|b"
    assert _cell("a\\\\|b") == "a\\\\\\|b"
