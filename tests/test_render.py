"""The report's behaviour: formatting, the odd-rank matrix, links, escaping, size bounds, CLI.

Bundles come from bench/synth.py (a deterministic torchrun job of any size) or were recorded
with ``diag capture`` (tests/golden/bundles/); the CLI is run as a user runs it.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import List, Set

import msgspec
import pytest

from bench.synth import make_bundle
from diag.bundle.io import JournalWriter, encode_bundle, write_bundle
from diag.commands import report as report_cmd
from diag.model import Bundle, Evidence, Frame, LogSample, Stack, Suspect, Verdict
from diag.render import fmt
from diag.render.build import build_view
from diag.render.html import render_html
from diag.render.markdown import MAX_CHARS, render_markdown
from diag.render.series import downsample
from diag.render.stacks import change
from diag.render.terminal import render_summary
from tests.conftest import REPO, run_diag

RECORDED = sorted((REPO / "tests" / "golden" / "bundles").glob("*.json"))


def _view(bundle: Bundle):  # type: ignore[no-untyped-def]
    return build_view(bundle, bundle.verdict, "bundle")


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: Set[str] = set()
        self.hrefs: List[str] = []

    def handle_starttag(self, tag: str, attrs: List[tuple]) -> None:  # type: ignore[type-arg]
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if name == "href" and value:
                self.hrefs.append(value)


def test_ranges_durations_sizes_read_the_same_everywhere() -> None:
    assert fmt.runs([8, 0, 1, 2, 5, 7]) == "0–2, 5, 7–8"
    assert fmt.runs([]) == ""
    assert fmt.duration(3570) == "59 min 30 s"
    assert fmt.duration(7200) == "2 h"
    assert fmt.size(6_000_000_000) == "5.6 GiB"
    assert fmt.command(["python", "-c", "print('x y')"]) == "python -c 'print('\\''x y'\\'')'"


def test_downsample_bounds_points_and_keeps_the_spike() -> None:
    points = [(float(t), 1.0) for t in range(10_000)]
    points[7_777] = (7_777.0, 500.0)
    out = downsample(points, 120)
    assert len(out) == 120
    assert max(v or 0 for _, v in out) == 500.0


def test_stack_change_names_what_moved() -> None:
    outer = (Frame(name="main", filename="t.py", line=9),)
    a = Stack(frames=(Frame(name="forward", filename="t.py", line=3), *outer))
    b = Stack(frames=(Frame(name="all_reduce", filename="c10d.py", line=1), *outer))
    c = Stack(frames=(Frame(name="forward", filename="t.py", line=5), *outer))
    assert change(a, b) == "forward → all_reduce under main"
    assert change(a, c) == "forward line 3 → 5 under main"
    assert change(a, a) == ""
    step = (Frame(name="train_step", filename="t.py", line=84), *outer)
    d = Stack(frames=(Frame(name="backward", filename="torch.py", line=1), *step))
    moved = Frame(name="train_step", filename="t.py", line=90)
    e = Stack(frames=(Frame(name="forward", filename="t.py", line=3), moved, *outer))
    assert change(d, e) == "now in forward (was backward); train_step line 84 → 90 under main"


def test_matrix_shows_the_odd_rank_and_collapses_the_stuck_samples() -> None:
    view = _view(make_bundle(ranks=8, threads=8, samples=30, odd_rank=5))
    matrix = view.matrix
    assert matrix.columns[-1] == "10–29"  # 20 stuck samples: one column
    last = {row.label: row.cells[-1] for row in matrix.rows}
    assert last["rank 5"].odd and last["rank 5"].letter != last["rank 0"].letter
    assert [label for label, cell in last.items() if cell.odd] == ["rank 5"]
    assert next(e for e in matrix.legend if e.letter == last["rank 0"].letter).top.startswith(
        "all_reduce"
    )
    # While every rank trains, no majority: nothing is odd.
    assert not any(row.cells[0].odd for row in matrix.rows)


@pytest.mark.parametrize("bundle_path", RECORDED, ids=lambda p: p.stem)
def test_every_internal_link_has_a_target(bundle_path: Path) -> None:
    from diag.bundle.io import load_bundle

    for bundle in (load_bundle(bundle_path), make_bundle(ranks=4, threads=8, samples=10)):
        parser = _Links()
        parser.feed(render_html(_view(bundle)))
        targets = [h[1:] for h in parser.hrefs if h.startswith("#")]
        assert targets, "the report links its sections"
        assert sorted(set(targets) - parser.ids) == []
        assert all(h.startswith("#") for h in parser.hrefs), "no link leaves the file"


def test_evidence_sections_map_to_report_anchors() -> None:
    bundle = make_bundle(ranks=4, threads=4, samples=4)
    pid2 = next(p.pid for p in bundle.processes if p.rank == 2)
    sections = ["timeline", "rank-2", f"pid-{pid2}", "futex", "collectives", "nccl-logs", "??"]
    verdict = Verdict(
        state="deadlocked",
        evidence=tuple(Evidence(signal=s, detail=s, section=s, ranks=(3,)) for s in sections),
    )
    view = build_view(bundle, verdict, "bundle")
    anchors = [e.anchor for e in view.evidence]
    assert anchors == [
        "timelines",
        "rank-2",
        "rank-2",
        "futex",
        "collectives",
        "nccl-logs",
        "rank-3",
    ]


def test_hostile_text_is_escaped_in_html_and_markdown() -> None:
    bundle = make_bundle(ranks=2, threads=3, samples=3)
    evil = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    last = bundle.samples[-1]
    log = msgspec.structs.replace(last.logs[0], tail=(evil,), path="/tmp/<b>.log")
    samples = (*bundle.samples[:-1], msgspec.structs.replace(last, logs=(log,)))
    verdict = msgspec.structs.replace(bundle.verdict, summary=f"rank 1 prints {evil}")
    bundle = msgspec.structs.replace(bundle, samples=samples, verdict=verdict)
    html = render_html(_view(bundle))
    assert "<script" not in html and "<img" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    md = render_markdown(_view(bundle))
    assert not re.search(r"(?<!\\)<(script|img)", md), "a raw tag reaches GitHub"
    assert "\\<script\\>" in md


def test_markdown_is_hard_capped_for_a_github_comment() -> None:
    bundle = make_bundle(ranks=4, threads=4, samples=4)
    deep = Stack(frames=tuple(Frame(name=f"f{i}", filename="x.py", line=i) for i in range(9000)))
    main = bundle.samples[-1].processes[1].threads[0]
    stacks = {**bundle.stacks, main.stack_id or "": deep}
    verdict = Verdict(
        state="deadlocked",
        summary="x",
        evidence=tuple(Evidence(signal="s", detail="d" * 50) for _ in range(300)),
        suspects=(Suspect(pid=bundle.samples[-1].processes[1].pid, reason="deep"),),
    )
    md = render_markdown(_view(msgspec.structs.replace(bundle, stacks=stacks, verdict=verdict)))
    assert len(md) <= MAX_CHARS
    assert "cut to fit a GitHub comment" in md
    assert md.count("```") % 2 == 0


def test_one_hour_capture_renders_a_few_mb() -> None:
    bundle = make_bundle(ranks=8, threads=60, samples=120)
    html = render_html(_view(bundle))
    assert len(html.encode()) < 3_000_000
    assert html.count('class="stack"') == len(_view(bundle).stacks) <= 12  # each stack once


@pytest.mark.slow
def test_day_long_capture_stays_under_10_mb() -> None:
    bundle = make_bundle(ranks=8, threads=60, samples=2880)
    html = render_html(_view(bundle))
    assert len(html.encode()) < 10_000_000
    view = _view(bundle)
    assert len(view.matrix.columns) <= 60
    assert all(
        len(s.points.split()) <= 120
        for g in view.timelines.groups
        for r in g.rows
        for s in r.sparks
    )


def test_missing_verdict_is_computed_or_reported_as_none(monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = make_bundle(ranks=2, threads=3, samples=3, with_verdict=False)
    judged, source = report_cmd.resolve_verdict(bundle)
    assert source == "computed" and judged.verdict is not None

    def broken(_: Bundle) -> Verdict:
        raise RuntimeError("classifier bug")

    monkeypatch.setattr(report_cmd, "judge", broken)
    judged, source = report_cmd.resolve_verdict(bundle)
    assert (judged.verdict, source) == (None, "none")
    view = build_view(bundle, None, "none")
    assert view.banner.state == "no verdict" and not view.banner.has_verdict
    assert "no verdict" in render_html(view)


def test_multi_host_bundle_groups_per_host() -> None:
    view = _view(make_bundle(ranks=4, threads=3, samples=3, hosts=2))
    assert [g.host for g in view.timelines.groups] == ["", "node-0", "node-1"]
    assert "node-1" in render_summary(view).splitlines()[-3]


def test_report_cli_rerenders_a_cut_short_journal(tmp_path: Path) -> None:
    bundle = make_bundle(ranks=2, threads=3, samples=4)
    journal = tmp_path / "watch.jsonl"
    writer = JournalWriter(journal)
    writer.header(bundle.host, bundle.target, bundle.created_s)
    for n, sample in enumerate(bundle.samples[:3]):
        writer.sample(sample, bundle.processes if n == 0 else (), bundle.stacks if n == 0 else {})
    writer.close()
    with open(journal, "ab") as fh:  # SIGKILL in the middle of a line
        fh.write(encode_bundle(bundle)[:40])
    done = run_diag(["report", str(journal)])
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "watch.html").read_text()
    assert "cut short" in html and 'id="matrix"' in html
    assert "cut short" in (tmp_path / "watch.md").read_text()


def test_report_cli_reads_an_old_minimal_bundle(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(
        '{"schema_version": 1, "samples": [{"index": 0, "t_s": 5.0, "processes": [{"pid": 7}]}]}'
    )
    out = tmp_path / "out" / "r.html"
    out.parent.mkdir()
    done = run_diag(["report", str(old), "-o", str(out)])
    assert done.returncode == 0, done.stderr
    assert out.exists() and (out.parent / "r.md").exists()
    assert f"wrote {out}" in done.stdout


def test_report_cli_rejects_a_non_bundle_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    done = run_diag(["report", str(bad)])
    assert done.returncode == 8
    assert done.stderr.count("\n") == 1 and "not a readable diag bundle" in done.stderr


def test_summary_cli_prints_verdict_and_rank_table() -> None:
    done = run_diag(["summary", str(REPO / "tests" / "golden" / "bundles" / "zombie_rank.json")])
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("verdict: DEADLOCKED")
    assert re.search(r"^rank 2 \*\s+rank\s+\d+\s+zombie", out, re.M)
    assert re.search(r"^process\s+role\s+pid\s+status", out, re.M)


def test_report_scrubs_secrets_left_in_a_bundle(tmp_path: Path) -> None:
    secret = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm123456"
    bundle = make_bundle(ranks=2, threads=3, samples=3)
    procs = tuple(
        msgspec.structs.replace(p, env={**p.env, "HF_TOKEN": "s3cr3t-value-xyz"})
        for p in bundle.processes
    )
    last = bundle.samples[-1]
    log = LogSample(
        path="/x.log", tail=(f"login token={secret}", "using s3cr3t-value-xyz"), lines=2
    )
    samples = (*bundle.samples[:-1], msgspec.structs.replace(last, logs=(log,)))
    path = tmp_path / "old.json"
    write_bundle(msgspec.structs.replace(bundle, processes=procs, samples=samples), path)
    done = run_diag(["report", str(path)])
    assert done.returncode == 0, done.stderr
    summary = run_diag(["summary", str(path)])
    for text in (
        (tmp_path / "old.html").read_text(),
        (tmp_path / "old.md").read_text(),
        summary.stdout,
    ):
        assert secret not in text and "s3cr3t-value-xyz" not in text


def test_templates_ship_as_package_data() -> None:
    import importlib.resources

    names = {p.name for p in importlib.resources.files("diag.report_templates").iterdir()}
    assert {"report.html.j2", "report.css"} <= names
