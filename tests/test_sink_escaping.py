"""Every string escaped for its sink, every bad number or encoding a usage error (issue #25).

HTML: an escape sequence in an environment value, a log line or any bundle string reaches the
file with its control characters made visible, never raw. Markdown: every field, the diag
version of a crafted (or remote node's) bundle too. Terminal: a newline in an output path does
not start a line of its own. Flags: ``--interval 1e308``, a non-UTF-8 ``--log`` and a
5,000-character ``-o`` are one-line usage errors (exit 2), not internal errors."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, List

import msgspec
import pytest
from conftest import PROGRAMS, run_diag

from bench.synth import make_bundle
from diag.errors import EXIT_USAGE
from diag.model import Bundle
from diag.render.build import build_view
from diag.render.html import render_html
from diag.render.markdown import render_markdown

ESC = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x9b31m\u202e"  # OSC 52, CSI clear, C1 CSI, bidi override


def _hostile_bundle() -> Bundle:
    bundle = make_bundle(ranks=2, threads=3, samples=3)
    infos = list(bundle.processes)
    infos[1] = msgspec.structs.replace(infos[1], env={**infos[1].env, "NCCL_DEBUG": f"INFO{ESC}"})
    last = bundle.samples[-1]
    log = msgspec.structs.replace(last.logs[0], tail=(f"loss 1.0 {ESC}",), path=f"/tmp/x{ESC}.log")
    samples = (*bundle.samples[:-1], msgspec.structs.replace(last, logs=(log,)))
    host = msgspec.structs.replace(
        bundle.host, diag_version="9.9\n## verdict: PROGRESSING - close this ticket <img src=x>"
    )
    verdict = msgspec.structs.replace(bundle.verdict, summary=f"rank 1 {ESC} waits")
    return msgspec.structs.replace(
        bundle, processes=tuple(infos), samples=samples, host=host, verdict=verdict
    )


def _view(bundle: Bundle) -> Any:
    return build_view(bundle, bundle.verdict, "bundle")


def test_html_shows_control_characters_never_writes_them() -> None:
    html = render_html(_view(_hostile_bundle()))
    raw = re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", html)
    assert raw == [], raw
    assert "\\x1b]52;c;" in html  # the evidence stays visible


def test_markdown_escapes_every_field_the_version_too() -> None:
    md = render_markdown(_view(_hostile_bundle()))
    assert not re.search(r"^#+ verdict", md, re.M), "a forged heading"
    assert not re.search(r"(?<!\\)<img", md), "raw HTML reaches GitHub"
    assert "\x1b" not in md and "\u202e" not in md
    footer = [ln for ln in md.splitlines() if ln.startswith("<sub>diag ")]
    assert len(footer) == 1 and "PROGRESSING" in footer[0], footer  # on the footer's line


def test_a_newline_in_the_output_path_forges_no_line(spawn: Any, tmp_path: Path) -> None:
    job = spawn([sys.executable, str(PROGRAMS / "exit_soon.py"), "60"])
    odd = tmp_path / "a\nverdict: progressing"
    odd.mkdir()
    result = run_diag(["capture", "--pid", str(job.pid), "--count", "1", "-o", str(odd / "r")])
    assert result.returncode == 0, result.stderr
    lines: List[str] = (result.stdout + result.stderr).splitlines()
    assert not any(ln.startswith("verdict: progressing") for ln in lines), lines
    assert any("a\\x0averdict: progressing/r.json" in ln for ln in lines), lines


@pytest.mark.parametrize("value", ["1e308", "nan", "inf", "-1", "-inf"])
@pytest.mark.parametrize("verb", ["watch", "capture"])
def test_a_bad_interval_is_a_usage_error(verb: str, value: str) -> None:
    result = run_diag([verb, "--pid", str(os.getpid()), "--count", "1", f"--interval={value}"])
    assert result.returncode == EXIT_USAGE, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--interval" in lines[0] and "internal" not in lines[0], lines


@pytest.mark.parametrize(
    "args",
    [
        ["--log", os.fsdecode(b"/tmp/run-\xff.log")],
        ["-o", os.fsdecode(b"/tmp/run-\xff")],
        ["-o", "/tmp/" + "r" * 5000],
        ["-o", "/tmp/" + "r" * 250],  # fits NAME_MAX, but .r...r.log.stdout would not
        ["--log", "/tmp/" + "l" * 300 + ".log"],
        ["--fr-dir", os.fsdecode(b"/tmp/fr-\xff")],
    ],
    ids=["log-not-utf8", "out-not-utf8", "out-5000", "out-name-max", "log-name-max", "fr-utf8"],
)
@pytest.mark.parametrize("verb", ["watch", "capture"])
def test_a_bad_path_is_a_one_line_usage_error(verb: str, args: List[str]) -> None:
    result = run_diag([verb, "--pid", str(os.getpid()), "--count", "1", *args])
    assert result.returncode == EXIT_USAGE, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("diag: "), lines
    assert "internal" not in lines[0] and len(lines[0]) < 600, lines


def test_diag_summary_prints_each_bundle_value_on_its_own_line() -> None:
    from diag.render.terminal import render_summary

    bundle = _hostile_bundle()
    forged = "x\nverdict: PROGRESSING - all good"
    bundle = msgspec.structs.replace(
        bundle, verdict=msgspec.structs.replace(bundle.verdict, summary=forged)
    )
    text = render_summary(_view(bundle))
    assert not any(ln.startswith("verdict: PROGRESSING") for ln in text.splitlines()), text
    assert "x\\x0averdict: PROGRESSING" in text
