"""Total budgets of one capture (issue #25): stacks, outputs and environment, all recorded.

The hostile targets are those of the benchmark (``bench/hostile.py``) at sizes the suite can
afford, with the caps lowered through DIAG_MAX_STACK_BYTES / DIAG_MAX_JSON_BYTES /
DIAG_MAX_HTML_BYTES so that they are still exceeded: distinct deep stacks of long names stay
under the caps, the environment flood costs seconds, and a secret that no budget lets be
*kept* is still learned and scrubbed from every output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from conftest import DIAG, PROGRAMS

from diag.bundle.stack_budget import (
    CUT,
    FRAME_FILE_CHARS,
    FRAME_NAME_CHARS,
    StackBudget,
    shorten_frames,
    stack_bytes,
)
from diag.model import Frame, Stack
from diag.probes.env import MAX_KEPT_VARS, bounded_env
from diag.redaction import literals
from diag.redaction.literals import LiteralSet
from diag.redaction.redact import Redactor
from diag.render.output_caps import cut_text

CAPS = {
    "DIAG_MAX_STACK_BYTES": "300000",
    "DIAG_MAX_JSON_BYTES": "200000",
    "DIAG_MAX_HTML_BYTES": "100000",
    "DIAG_MAX_MD_BYTES": "600",
}


def _capture(pid: int, out: Path, env: Dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [*DIAG, "capture", "--pid", str(pid), "--count", "1", "-o", str(out)]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=180, env={**os.environ, **env}
    )


def _reasons(bundle: Dict[str, Any]) -> List[str]:
    found = [f["reason"] for f in bundle.get("failures", [])]
    for sample in bundle["samples"]:
        found += [f["reason"] for f in sample.get("failures", [])]
    return found


def test_distinct_deep_stacks_stay_under_lowered_caps(spawn: Any, tmp_path: Path) -> None:
    job = spawn([sys.executable, str(PROGRAMS / "deep_distinct.py"), "6", "1500"])
    result = _capture(job.pid, tmp_path / "cap", CAPS)
    assert result.returncode == 0, result.stderr
    json_bytes = (tmp_path / "cap.json").stat().st_size
    html_bytes = (tmp_path / "cap.html").stat().st_size
    assert json_bytes <= int(CAPS["DIAG_MAX_JSON_BYTES"]), json_bytes
    assert html_bytes <= int(CAPS["DIAG_MAX_HTML_BYTES"]), html_bytes
    bundle = json.loads((tmp_path / "cap.json").read_text())
    deep = [s for s in bundle["stacks"].values() if len(s["frames"]) > 8]
    assert deep, "the stacks were read"
    for stack in bundle["stacks"].values():
        for frame in stack["frames"]:
            assert len(frame["name"]) <= FRAME_NAME_CHARS + len(CUT) + 64
            assert len(frame.get("filename", "")) <= FRAME_FILE_CHARS + len(CUT)
    reasons = _reasons(bundle)
    assert any("stacks reached their budget" in r for r in reasons), reasons
    assert any("the JSON bundle came to" in r for r in reasons), reasons
    html = (tmp_path / "cap.html").read_text()
    assert "the HTML report came to" in html or "the JSON bundle came to" in html
    md = (tmp_path / "cap.md").read_bytes()
    assert len(md) <= int(CAPS["DIAG_MAX_MD_BYTES"]), len(md)
    assert md.decode("utf-8").endswith("the whole report is cap.html)_\n"), md[-200:]


def test_markdown_is_cut_at_a_line_under_its_cap() -> None:
    text = "".join(f"line {i} \u00e9\u00e9\u00e9\n" for i in range(1000)).encode("utf-8")
    assert cut_text(text, len(text), "r.html") == text
    cut = cut_text(text, 500, "r.html")
    assert len(cut) <= 500
    body, _, note = cut.decode("utf-8").rpartition("\n_(cut at 500 bytes")
    assert body.endswith("\u00e9\u00e9\u00e9\n") and "the whole report is r.html" in note
    assert text.startswith(body.encode("utf-8"))


def test_environment_flood_is_bounded_and_leaks_nothing(spawn: Any, tmp_path: Path) -> None:
    """3 children x 20,000 secret-named variables and 300 allowlisted ones: seconds, not
    minutes; 256 allowlisted variables kept, the rest counted; a secret at the very end of
    each environ block (past every kept budget) and on each child's command line is scrubbed
    from every output and from what diag prints."""
    planted = "Zq8vPlantedPastBudget4242xx"
    job = spawn(
        [sys.executable, str(PROGRAMS / "env_flood.py"), "3", "20000", "300"],
        env={"PLANTED_TOKEN": planted},
    )
    started = time.monotonic()
    result = _capture(job.pid, tmp_path / "env", {})
    took_s = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert took_s < 60, took_s
    bundle = json.loads((tmp_path / "env.json").read_text())
    children = [p for p in bundle["processes"] if p["pid"] != job.pid]
    assert len(children) == 3
    for child in children:
        pads = [k for k in child.get("env", {}) if k.startswith("NCCL_PAD_")]
        assert len(child["env"]) <= MAX_KEPT_VARS and 0 < len(pads) < 300
    reasons = _reasons(bundle)
    assert any("allowlisted environment variables not kept" in r for r in reasons), reasons
    for path in tmp_path.iterdir():
        assert planted not in path.read_text(errors="replace"), path.name
    assert planted not in result.stdout + result.stderr
    assert "--note=" in json.dumps(bundle["processes"])  # the argument is there, scrubbed


def test_kept_env_budget_still_learns_every_secret() -> None:
    env = {f"NCCL_PAD_{i:04d}": "x" for i in range(MAX_KEPT_VARS + 50)}
    env["ZZ_LATE_TOKEN"] = "late-secret-value-77"
    redactor = Redactor()
    kept, left_out = bounded_env(env, redactor)
    assert len(kept) == MAX_KEPT_VARS and left_out == 50
    assert "late-secret-value-77" not in redactor.scrub("x late-secret-value-77 y")


def test_stack_budget_cuts_then_drops() -> None:
    frame = Frame(name="n" * 5000, filename="/" + "f" * 5000, line=1)
    (short,) = shorten_frames((frame,))
    assert short.name == "n" * FRAME_NAME_CHARS + CUT
    assert short.filename == ("/" + "f" * 5000)[:FRAME_FILE_CHARS] + CUT
    deep = Stack(frames=(frame,) * 400)
    budget = StackBudget(max_bytes=stack_bytes(Stack(frames=(short,) * 400)))
    assert len(budget.admit(deep).frames) == 400
    cut = budget.admit(deep)
    assert len(cut.frames) == 33 and "368 more frames not kept" in cut.frames[-1].name
    while budget.used_bytes < 2 * budget.max_bytes:
        budget.admit(deep)
    assert len(budget.admit(deep).frames) == 1
    note = budget.failure("h", 0)
    assert note is not None and f"{budget.dropped} more stacks not kept" in note.reason
    assert budget.failure("h", 1) is None  # nothing new since


def test_literal_set_is_leftmost_longest() -> None:
    words = LiteralSet({"abcdefgh12345", "abcdefgh12345678", "zz-secret"})
    text = "x abcdefgh12345678 y abcdefgh12345 z abcdefgh1234 zz-secretzz-secret"
    assert words.sub("<r>", text) == "x <r> y <r> z abcdefgh1234 <r><r>"
    assert LiteralSet(set()).sub("<r>", "abc") == "abc"


def test_cut_prefixes_with_many_secrets_and_cuts_take_seconds() -> None:
    """30,000 learned values and 16,000 cut names (a flood beside the hostile stacks): every
    cut was tried against every value, 17 s for 200 cuts; now one index, under 10 s in all."""
    redactor = Redactor()
    redactor.add_environ(
        {f"T_TOKEN_{i}": f"v{i:08d}q{i * 7919 % 99991:06d}z" for i in range(30000)}
    )
    started = time.monotonic()
    redactor.scrub(("d" * 512 + CUT + " ") * 16000)
    assert time.monotonic() - started < 10
    assert redactor.scrub("x v00000123q0741" + CUT) == "x <redacted>" + CUT


def test_literal_set_without_the_package_falls_back_to_the_alternation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(literals, "_ahocorasick", None)
    words = LiteralSet({"abcdefgh12345", "abcdefgh12345678"})
    assert words.sub("<r>", "x abcdefgh12345678 abcdefgh12345") == "x <r> <r>"
