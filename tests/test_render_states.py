"""A process that cannot run is marked where the reader sees it first (#16).

A stopped (T), zombie or D-state process reads "alive" in no collapsed rank header: the word
("stopped (T)", "zombie", "D: uninterruptible") is in the ``<summary>`` of its rank, in its
timeline and stack-matrix rows, in the Markdown per-process table and the terminal summary.
"""

from __future__ import annotations

import re
from typing import Dict

import pytest

from diag.model import Bundle
from diag.render import fmt
from diag.render.build import build_view
from diag.render.html import render_html
from diag.render.markdown import render_markdown
from diag.render.terminal import render_summary
from tests.series import BARRIER_STACK, Proc, build

WORDS = {0: "", 1: "stopped (T)", 2: "zombie", 3: "D: uninterruptible"}


def _bundle() -> Bundle:
    def rank(r: int, **kw: object) -> Proc:
        return Proc(100 + r, rank=r, world_size=4, rank_source="env:RANK", **kw)  # type: ignore[arg-type]

    return build(
        [
            rank(0, stack=BARRIER_STACK),
            rank(1, stack=BARRIER_STACK, state="T", wchan="do_signal_stop", syscall="running"),
            rank(2, status=["alive", "zombie", "zombie"], exit_code=-9),
            rank(3, stack=BARRIER_STACK, state="D", wchan="nfs_wait_bit_killable"),
        ]
    )


def _summaries(html: str) -> Dict[int, str]:
    out = {}
    for r, summary in re.findall(
        r'<details id="rank-(\d+)"[^>]*>\s*<summary>(.*?)</summary>', html
    ):
        out[int(r)] = summary
    return out


def _rows(html: str, section: str) -> Dict[int, str]:
    body = html.split(f'<section id="{section}">', 1)[1].split("</section>", 1)[0]
    return {
        int(r): row
        for row, r in re.findall(r'(<tr[^>]*>\s*<t[dh]><a href="#rank-(\d+)".*?</tr>)', body)
    }


@pytest.mark.parametrize(
    ("status", "state", "word"),
    [
        ("alive", "T", "stopped (T)"),
        ("alive", "t", "traced (t)"),
        ("alive", "D", "D: uninterruptible"),
        ("alive", "Z", "zombie"),
        ("zombie", "Z", "zombie"),
        ("alive", "S", ""),
        ("alive", "R", ""),
        ("exited", "Z", ""),  # the status says it already
        ("unreadable", "?", ""),
    ],
)
def test_badge_words(status: str, state: str, word: str) -> None:
    assert fmt.proc_badge(status, state) == word


def test_collapsed_headers_and_rows_name_the_state() -> None:
    view = build_view(_bundle(), None, "none")
    html = render_html(view)
    summaries = _summaries(html)
    assert set(summaries) == {0, 1, 2, 3}
    for r, word in WORDS.items():
        if word:
            assert word in summaries[r], summaries[r]
            assert "alive" not in summaries[r], summaries[r]
        else:
            assert "alive" in summaries[r]
            assert "pstate" not in summaries[r]
    for section in ("timelines", "matrix"):
        rows = _rows(html, section)
        assert set(rows) == {0, 1, 2, 3}, section
        for r, word in WORDS.items():
            assert (word in rows[r]) if word else ("pstate" not in rows[r]), (section, rows[r])


def test_markdown_and_terminal_rows_name_the_state() -> None:
    view = build_view(_bundle(), None, "none")
    md = render_markdown(view)
    table = md.split("### Processes (last sample)", 1)[1]
    lines = {
        int(m.group(1)): line
        for line in table.splitlines()
        if (m := re.match(r"\| rank (\d+)", line))
    }
    assert set(lines) == {0, 1, 2, 3}
    for r, word in WORDS.items():
        assert (f"**{word}**" in lines[r]) if word else ("| alive |" in lines[r]), lines[r]
    summary = render_summary(view)
    for word in filter(None, WORDS.values()):
        assert word in summary
