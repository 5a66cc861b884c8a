"""The HTML report in a real browser with JavaScript off: banner and matrix visible, no network.

Headless Chromium is driven over its DevTools pipe (``--remote-debugging-pipe``: fds 3/4,
NUL-separated JSON), not with ``--dump-dom``/``--screenshot``, because those switches print
nothing once scripts are disabled. Through the pipe the test turns script execution off for
the page, loads the report rendered by the real ``diag report`` command, reads the DOM, measures
the verdict banner and the stack matrix, screenshots them (kept under the test's tmp dir) and
records every request the page made: only the file itself may be loaded.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from markupsafe import escape

from tests.conftest import REPO, run_diag

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.chromium,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make system-deps)"),
]
BUNDLE = REPO / "tests" / "golden" / "bundles" / "fr_lag_4ranks.json"


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe."""

    def __init__(
        self, profile: Path, width: int = 1300, height: int = 2000, scripts: bool = False
    ) -> None:
        self.scripts = scripts
        to_r, self._to_w = os.pipe()
        self._from_r, from_w = os.pipe()
        flags = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--blink-settings=scriptEnabled={str(scripts).lower()}",
            f"--user-data-dir={profile}", "--remote-debugging-pipe",
            f"--window-size={width},{height}",
        ]  # fmt: skip
        # The pipe must be fds 3 (commands in) and 4 (replies out) in the browser.
        script = f'exec "$0" "$@" 3<&{to_r} 4>&{from_w}'
        self.proc = subprocess.Popen(
            ["bash", "-c", script, str(CHROMIUM), *flags, "about:blank"],
            pass_fds=(to_r, from_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._id = 0
        self.events: List[Dict[str, Any]] = []
        self.session: Optional[str] = None

    def call(self, method: str, **params: Any) -> Dict[str, Any]:
        self._id += 1
        msg: Dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if self.session and not method.startswith(("Target.", "Browser.")):
            msg["sessionId"] = self.session
        os.write(self._to_w, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self._buf:
                chunk = os.read(self._from_r, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe during {method}")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))
            self.events.append(reply)

    def open_page(self) -> None:
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.call("Emulation.setScriptExecutionDisabled", value=not self.scripts)
        self.call("Network.enable")
        self.call("Page.enable")

    def load(self, url: str, timeout_s: float = 60.0) -> None:
        self.events.clear()
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout_s
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            assert time.monotonic() < deadline, "page did not finish loading"
            self.call("Page.getFrameTree")
            time.sleep(0.05)

    def requested_urls(self) -> List[str]:
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e.get("method") == "Network.requestWillBeSent"
        ]

    def box(self, root: int, selector: str) -> Tuple[float, float, float, float]:
        node = self.call("DOM.querySelector", nodeId=root, selector=selector)["nodeId"]
        assert node, f"{selector} not in the DOM"
        quad = self.call("DOM.getBoxModel", nodeId=node)["model"]["border"]
        xs, ys = quad[0::2], quad[1::2]
        return min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        os.close(self._to_w)
        os.close(self._from_r)


def png_pixels(data: bytes) -> Tuple[int, int, int, bytes]:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes): w, h, bpp, rows."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, bpp = 8, b"", 0, 0, 4
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big")
            assert body[8] == 8 and body[12] == 0, "8-bit, non-interlaced"
            bpp = {2: 3, 6: 4}[body[9]]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    out = bytearray()
    prev = bytearray(stride)
    for y in range(height):
        kind, row = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            left = row[i - bpp] if i >= bpp else 0
            up, corner = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                row[i] = (row[i] + left) & 0xFF
            elif kind == 2:
                row[i] = (row[i] + up) & 0xFF
            elif kind == 3:
                row[i] = (row[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                row[i] = (row[i] + pred) & 0xFF
        out += row
        prev = row
    return width, height, bpp, bytes(out)


def ink_share(png: bytes) -> float:
    """Share of pixels that are not white (page background): 0 for a blank render."""
    width, height, bpp, px = png_pixels(png)
    inked = sum(1 for i in range(0, len(px), bpp) if min(px[i], px[i + 1], px[i + 2]) < 250)
    return inked / max(1, width * height)


@pytest.fixture
def report_html(tmp_path: Path) -> Path:
    out = tmp_path / "report.html"
    done = run_diag(["report", str(BUNDLE), "-o", str(out)])
    assert done.returncode == 0, done.stderr
    return out


def test_report_html_loads_nothing_external(report_html: Path) -> None:
    text = report_html.read_text()
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", text, re.I)
    assert not re.search(r"<script|<link\b|@import|url\(", text, re.I)
    assert "<details" in text  # collapsing without JavaScript


def test_banner_and_matrix_visible_with_javascript_off(report_html: Path, tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text(
        "<p id='x'>static</p><script>document.getElementById('x').textContent='ran'</script>"
    )
    browser = DevTools(tmp_path / "profile")
    try:
        browser.open_page()
        browser.load(control.as_uri())
        root = browser.call("DOM.getDocument", depth=-1)["root"]["nodeId"]
        dom = browser.call("DOM.getOuterHTML", nodeId=root)["outerHTML"]
        assert ">static</p>" in dom, "JavaScript ran: the test would not prove anything"

        browser.load(report_html.as_uri())
        assert browser.requested_urls() == [report_html.as_uri()]
        root = browser.call("DOM.getDocument", depth=-1)["root"]["nodeId"]
        dom = browser.call("DOM.getOuterHTML", nodeId=root)["outerHTML"]
        assert 'id="verdict"' in dom and "deadlocked" in dom
        assert 'id="matrix"' in dom and 'class="matrix"' in dom

        shots: Dict[str, float] = {}
        for name, selector in (("verdict", "#verdict"), ("matrix", "table.matrix")):
            x, y, w, h = browser.box(root, selector)
            assert w > 40 and h > 40, f"{selector} has no visible size ({w}x{h})"
            clip = {"x": x, "y": y, "width": w, "height": min(h, 400), "scale": 1}
            png = base64.b64decode(
                browser.call("Page.captureScreenshot", format="png", clip=clip)["data"]
            )
            (tmp_path / f"{name}.png").write_bytes(png)
            shots[name] = ink_share(png)
        page = base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"])
        (tmp_path / "report.png").write_bytes(page)
    finally:
        browser.close()
    # The banner is a coloured box, the matrix coloured cells: far from blank.
    assert shots["verdict"] > 0.5, shots
    assert shots["matrix"] > 0.3, shots


# Names a hostile job chooses (process title, argv, thread names, host, log path and lines,
# environment, what the verdict quotes), each trying another context of the page: the title,
# a quoted attribute (either quote), raw-text elements (script, style, textarea), SVG, comments,
# CDATA, a javascript: URL, template literals, the line separators JavaScript treats as
# newlines. Each payload that ran would mark the body.
HOSTILE = (
    'q"uo\'te `tick ${x}"><img src=x onerror="document.body.dataset.pwned=\'attr\'">',
    "</title><script>document.body.dataset.pwned='title'</script>",
    "</script><script>document.body.dataset.pwned='script'</script>",
    "<img src=x onerror=\"document.body.dataset.pwned='img'\">",
    '"><svg onload="document.body.dataset.pwned=\'svg\'">',
    "'><svg/onload=document.body.dataset.pwned='sq'>",
    "</style><style>*{display:none}</style>",
    "</textarea></pre></details></svg><!-- ]]><![CDATA[ &amp;&lt;",
    "javascript:document.body.dataset.pwned='href'",
    "line\u2028sep\u2029para\x1b]0;t\x07",
)
_SHAPE_JS = """JSON.stringify({
  title: document.title,
  pwned: document.body.dataset.pwned || null,
  hidden: getComputedStyle(document.body).display === 'none',
  styles: document.styleSheets.length,
  shape: Array.from(document.querySelectorAll('*')).map(
    e => e.tagName + '[' + Array.from(e.attributes).map(a => a.name).sort().join(',') + ']'),
})"""


def _named_bundle(names: Tuple[str, ...]) -> Any:
    """A synthetic bundle with ``names`` in every place a job names itself."""
    import msgspec

    from bench.synth import make_bundle

    b = make_bundle(ranks=2, threads=3, samples=3)
    joined = " ".join(names)
    infos = tuple(
        msgspec.structs.replace(
            info,
            name=names[i % len(names)][:15],
            cmdline=("python", "train.py", *names),
            env={**info.env, "NCCL_DEBUG": joined},
        )
        for i, info in enumerate(b.processes)
    )
    samples = []
    for s in b.samples:
        procs = tuple(
            msgspec.structs.replace(
                p,
                threads=tuple(
                    msgspec.structs.replace(t, name=names[j % len(names)])
                    for j, t in enumerate(p.threads)
                ),
            )
            for p in s.processes
        )
        logs = tuple(
            msgspec.structs.replace(log, path=f"/tmp/{names[1]}.log", tail=names) for log in s.logs
        )
        samples.append(msgspec.structs.replace(s, processes=procs, logs=logs))
    verdict = msgspec.structs.replace(
        b.verdict,
        summary=f"rank 1 waits: {joined}",
        suspects=tuple(msgspec.structs.replace(x, reason=joined) for x in b.verdict.suspects),
    )
    stacks = {
        key: msgspec.structs.replace(
            stack,
            frames=tuple(
                msgspec.structs.replace(f, name=names[(k + 3 * si) % len(names)])
                if f.filename.startswith("/opt/job/")
                else f
                for k, f in enumerate(stack.frames)
            ),
        )
        for si, (key, stack) in enumerate(b.stacks.items())
    }
    return msgspec.structs.replace(
        b,
        processes=infos,
        samples=tuple(samples),
        stacks=stacks,
        verdict=verdict,
        target=msgspec.structs.replace(b.target, command=("python", "train.py", *names)),
        host=msgspec.structs.replace(b.host, hostname=names[4]),
    )


def _render(names: Tuple[str, ...], out: Path) -> Tuple[Path, str]:
    """The report of a bundle named ``names``, by the real ``diag report``; and the title the
    view meant to give it (controls made visible, as the whole page is)."""
    from diag.bundle.io import encode_bundle
    from diag.render.build import build_view
    from diag.text.terminal import safe_text

    bundle = _named_bundle(names)
    out.mkdir()
    (out / "b.json").write_bytes(encode_bundle(bundle))
    done = run_diag(["report", str(out / "b.json"), "-o", str(out / "r.html")])
    assert done.returncode == 0, done.stderr
    title = build_view(bundle, bundle.verdict, "bundle").meta.title
    return out / "r.html", " ".join(safe_text(title).split())


def test_hostile_names_cannot_change_the_dom_with_javascript_on(tmp_path: Path) -> None:
    """Scripts on, so an injected one would run: the page's title is the intended text, its
    elements and attribute names are those of the same report with plain names, no payload
    ran, the one stylesheet is diag's and the page is shown."""
    hostile, hostile_title = _render(HOSTILE, tmp_path / "hostile")
    plain_names = tuple(f"name{i}" for i in range(len(HOSTILE)))
    plain, _ = _render(plain_names, tmp_path / "plain")
    control = tmp_path / "control.html"
    control.write_text("<title>t</title><script>document.title='ran'</script>")
    browser = DevTools(tmp_path / "profile", scripts=True)
    try:
        browser.open_page()
        seen: Dict[str, Dict[str, Any]] = {}
        for name, page in (("control", control), ("hostile", hostile), ("plain", plain)):
            browser.load(page.as_uri())
            value = browser.call("Runtime.evaluate", expression=_SHAPE_JS)["result"]["value"]
            seen[name] = json.loads(value)
            if name != "control":
                assert browser.requested_urls() == [page.as_uri()], name
    finally:
        browser.close()
    assert seen["control"]["title"] == "ran", "JavaScript is off: the test would prove nothing"
    got = seen["hostile"]
    assert got["title"] == hostile_title, (got["title"], hostile_title)
    assert '"><img src=x onerror=' in got["title"]  # the markup of the name, as text
    assert got["pwned"] is None and not got["hidden"] and got["styles"] == 1
    assert got["shape"] == seen["plain"]["shape"]
    text = hostile.read_text()
    for name in HOSTILE[1:6]:  # the markup is there, as text a reader can see
        assert str(escape(name)) in text, name
    # ... in attributes too (a matrix cell's title names the frame), quotes escaped there.
    quoted = re.findall(r'title="([^"]*)"', text)
    assert any("&lt;img" in q for q in quoted) and any("&#34;" in q for q in quoted), quoted


def test_template_contexts_hold_escaped_values_only() -> None:
    """What the browser test relies on, kept by the template's own shape: every value in an
    attribute is inside double quotes (autoescape writes a quote as &#34;, and a space cannot
    end a quoted value), CSS takes numbers only, nothing is marked safe, no script or event
    handler exists for a value to land in, and <title> holds one escaped value."""
    template = (REPO / "report_templates" / "report.html.j2").read_text()
    body = re.sub(r"\{#.*?#\}", "", template, flags=re.S)
    assert "|safe" not in body.replace(" ", "") and "Markup" not in body
    assert not re.search(r"<script|\son[a-z]+\s*=|\sdata-|javascript:", body, re.I)
    # An expression right after `=` (unquoted), or in a single-quoted attribute: none.
    assert not re.search(r"=\s*\{\{", body), re.findall(r".{20}=\s*\{\{.{20}", body)
    assert not re.search(r"='[^']*\{\{", body)
    for style in re.findall(r'style="([^"]*)"', body):
        assert all(e.strip().endswith("|int") for e in re.findall(r"\{\{(.*?)\}\}", style)), style
    assert re.search(r"<title>\{\{ v\.meta\.title \}\}</title>", body)
