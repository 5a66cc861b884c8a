"""The ``.md`` report is pasted into tickets: target-chosen text must stay inert there, and no
secret any other output scrubs may survive in it (issue #32).

The Markdown is rendered with ``cmarkgfm`` - GitHub's own fork of cmark, with its autolink,
table and strike-through extensions, raw HTML let through - and the HTML it makes is read:
no link, image or tag of the target's, no heading or code fence it opened, and no ``@mention``
outside code (GitHub turns those into notifications after rendering). The secrets are planted
the ways Markdown escaping changes (``*``, ``_``, ``<``, ``|``, ``[``, ``~``, ``&``, backslash,
backtick) and through the real writer, ``write_reports``.
"""

from __future__ import annotations

import re
import secrets
from html.parser import HTMLParser
from pathlib import Path
from typing import List, Tuple

import msgspec
import pytest

from bench.synth import make_bundle
from diag.model import Bundle, Evidence, Frame, Stack, Suspect
from diag.redaction.redact import Redactor
from diag.render.build import build_view
from diag.render.markdown import render_markdown
from diag.render.outputs import write_reports
from diag.text.markdown_escape import md_code, md_escape

cmarkgfm = pytest.importorskip("cmarkgfm")
from cmarkgfm.cmark import Options  # noqa: E402

LIVE = (
    "@team",
    "ping @org/infra-oncall now",
    "[click me](http://evil.example/x)",
    "<http://evil.example/auto>",
    "https://evil.example/bare",
    "www.evil.example",
    "mail admin@evil.example",
    "![pixel](http://evil.example/p.png)",
    "<img src=x onerror=alert(1)>",
    '"><svg onload=alert(1)>',
    "</details><script>alert(1)</script>",
    "x\n```\n# forged heading\n```",
    "```` fence",
    "```",
    "~~~ tilde fence",
    "<sub>small</sub>",
    "a\u2028b `tick` <!-- comment -->",
)
# What the rendered ticket may hold: diag's own markup, nothing a target chose.
ALLOWED_TAGS = {
    "p", "code", "h2", "h3", "strong", "em", "blockquote", "ul", "ol", "li", "table", "thead",
    "tbody", "tr", "th", "td", "pre", "sub", "br",
}  # fmt: skip


class _Reader(HTMLParser):
    """Tags, attributes, and the text outside <code>/<pre> of rendered HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: List[Tuple[str, List[Tuple[str, str | None]]]] = []
        self.plain: List[str] = []
        self._code = 0

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        if tag in ("code", "pre"):
            self._code += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("code", "pre"):
            self._code -= 1

    def handle_comment(self, data: str) -> None:
        self.tags.append(("!--", []))

    def handle_data(self, data: str) -> None:
        if not self._code:
            self.plain.append(data)


def _github(md: str) -> _Reader:
    html = cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)
    reader = _Reader()
    reader.feed(html)
    return reader


def _assert_inert(md: str) -> None:
    page = _github(md)
    tags = {t for t, _ in page.tags}
    assert tags <= ALLOWED_TAGS, tags - ALLOWED_TAGS
    assert all(not attrs for t, attrs in page.tags if t != "td" and t != "th"), page.tags
    plain = "".join(page.plain)
    assert not re.search(r"(?<![\w`])@[A-Za-z0-9]", plain), "a live @mention"
    assert "evil.example" not in plain, "a URL GitHub would autolink"
    assert "forged heading" not in [ln.strip("# ") for ln in md.splitlines() if ln[:1] == "#"]


def _hostile_bundle(names: Tuple[str, ...]) -> Bundle:
    bundle = make_bundle(ranks=2, threads=3, samples=3)
    infos = list(bundle.processes)
    infos[0] = msgspec.structs.replace(infos[0], cmdline=("python", "train.py", *names))
    verdict = bundle.verdict
    assert verdict is not None
    pid = infos[1].pid
    verdict = msgspec.structs.replace(
        verdict,
        summary="rank 1 waits: " + " | ".join(names),
        evidence=(Evidence(signal="hostile", detail=" ".join(names)), *verdict.evidence),
        suspects=(Suspect(pid=pid, rank=1, reason=" ".join(names), chain=names[0]),),
    )
    host = msgspec.structs.replace(bundle.host, diag_version=" ".join(names))
    # The job's own frames named by the job too, fence-breaking names first: the suspect's
    # stack is written in a fenced block.
    order = sorted(names, key=lambda n: "```" not in n and "~~~" not in n)
    stacks = {key: _renamed(stack, order) for key, stack in bundle.stacks.items()}
    return msgspec.structs.replace(
        bundle, processes=tuple(infos), verdict=verdict, host=host, stacks=stacks
    )


def _renamed(stack: Stack, names: List[str]) -> Stack:
    """``stack`` with its n-th frame of the job's own code named ``names[n]``."""
    frames: List[Frame] = []
    n = 0
    for f in stack.frames:
        if f.filename.startswith("/opt/job/"):
            f = msgspec.structs.replace(f, name=names[n % len(names)])
            n += 1
        frames.append(f)
    return msgspec.structs.replace(stack, frames=tuple(frames))


@pytest.mark.parametrize("value", LIVE)
def test_each_live_form_is_inert_alone(value: str) -> None:
    _assert_inert(md_escape(value))
    _assert_inert("- " + md_escape(value, at_line_start=False))
    _assert_inert("| a |\n|---|\n| " + md_escape(value).replace("|", "\\|") + " |")
    _assert_inert(md_code(value))


def test_a_report_of_hostile_names_is_inert_on_github() -> None:
    bundle = _hostile_bundle(LIVE)
    md = render_markdown(build_view(bundle, bundle.verdict, "bundle"))
    _assert_inert(md)
    assert "### Stack of the suspect" in md and "\n```\n" in md  # a fenced stack was written
    # One fenced block holds the whole stack, the fence-breaking names inside it as text.
    html = cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)
    blocks = re.findall(r"<pre><code>(.*?)</code></pre>", html, re.S)
    assert len(blocks) == 1 and "tilde fence" in blocks[0] and "forged heading" in blocks[0]
    assert "all_reduce" in blocks[0] and "train.py" in blocks[0].splitlines()[-1]
    text = "".join(_github(md).plain)
    assert "rank 1 waits" in text  # the sentence is there, only its live words are code
    assert "@team" in md and "www.evil.example" in md  # visible as typed, as code


def test_a_mention_is_kept_visible_as_code() -> None:
    assert md_escape("ask @team") == "ask `@team`"
    assert md_escape("me@host.example:22 up") == "`me@host.example:22` up"
    assert md_escape("plain __init__") == "plain \\_\\_init\\_\\_"  # nothing live: as before


def _secret_values() -> List[str]:
    tail = secrets.token_hex(6)
    return [
        f"p*ss_{tail}*",
        f"_lead_{tail}_",
        f"<{tail}>&x",
        f"a|b|{tail}",
        f"[{tail}](x)",
        f"~~{tail}~~",
        f"back\\slash{tail}",
        f"tick`{tail}`",
        f"@{tail}",
        f"https://u:{tail}@evil.example/",
    ]


def test_no_secret_spelling_survives_in_markdown(tmp_path: Path) -> None:
    """A learned value in the names the Markdown escapes: scrubbed before it is escaped."""
    values = _secret_values()
    bundle = _hostile_bundle(tuple(f"name {v} end" for v in values))
    infos = list(bundle.processes)
    env = {f"DB_PASSWORD_{i}": v for i, v in enumerate(values)}
    infos[1] = msgspec.structs.replace(infos[1], env={**infos[1].env, **env})
    bundle = msgspec.structs.replace(bundle, processes=tuple(infos))
    html, md = write_reports(bundle, tmp_path / "run.json", Redactor())
    text = md.read_text()
    bare = text.replace("\\", "")  # every backslash escape undone
    for value in values:
        core = value.strip("*_<>&|[]~`@").split("|")[-1]
        for form in (value, md_escape(value), md_escape(value, False), core):
            assert form not in text, (value, form)
        assert value.replace("\\", "") not in bare, value
    assert "<redacted>" in text or "\\<redacted\\>" in text
    assert all(v not in html.read_text() for v in values)


def test_a_secret_shaped_value_in_markdown_syntax_is_scrubbed(tmp_path: Path) -> None:
    """Not learned, only shaped like one: the patterns see the value before the escapes."""
    pw = "*" + secrets.token_hex(8) + "_"
    bundle = _hostile_bundle((f"password={pw}", "Authorization: Bearer " + pw))
    _html, md = write_reports(bundle, tmp_path / "run.json", Redactor())
    text = md.read_text()
    core = pw.strip("*_")
    assert core not in text
