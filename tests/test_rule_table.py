"""The rule table as a spec: its rows, their order, and which row decides every recorded capture.

``tests/golden/rule_table.txt`` lists, for every recorded bundle (samples/bundles/ and
tests/golden/bundles/: real programs, real servers, scenario recordings), the rule that decided
and every later rule that would also have matched. A new rule, or a rule moved, shows its effect
on every known case in this one fast test: regenerate with
``DIAG_UPDATE_GOLDEN=1 pytest tests/test_rule_table.py`` and review the diff line by line.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path
from typing import List

import pytest

from diag.bundle.io import load_bundle
from diag.model import Verdict
from diag.verdict.classify import classify
from diag.verdict.rules import TABLE, apply
from diag.verdict.rules.base import FIXTURE_PREFIX, Rule, decided
from diag.vocab import PRE_RULE_IDS, RULE_IDS, STATES
from tests.conftest import REPO

GOLDEN = REPO / "tests" / "golden" / "rule_table.txt"
UPDATE = os.environ.get("DIAG_UPDATE_GOLDEN") == "1"
_ROWS = {r.id: r for r in TABLE}


def _bundles() -> List[Path]:
    return sorted((REPO / "samples" / "bundles").glob("*.json")) + sorted(
        (REPO / "tests" / "golden" / "bundles").glob("*.json")
    )


def _line(name: str, v: Verdict) -> str:
    also = ", ".join(f"{m.rule} ({m.state})" for m in v.also_matched) or "-"
    return f"{name}: {v.rule} -> {v.state} | also matched: {also}"


def test_rows_are_well_formed() -> None:
    """One row per rule id, each row's id its function's name and its module its family, one
    fallback, last."""
    ids = [r.id for r in TABLE]
    assert len(ids) == len(set(ids))
    assert set(ids) == set(RULE_IDS)
    assert not set(ids) & set(PRE_RULE_IDS)
    for row in TABLE:
        assert row.decide.__name__ == row.id
        assert row.decide.__module__ == f"diag.verdict.rules.{row.family}"
        assert row.gives, row.id
        assert row.fallback or row.outranks, f"{row.id}: say why it outranks the rows after it"
    assert [r.fallback for r in TABLE] == [False] * (len(TABLE) - 1) + [True]


def test_every_row_documents_itself_in_its_own_words() -> None:
    """Each row says what it detects and why (``doc``), and why it outranks the rows after it
    in a sentence of its own: no two rows share one (the report prints it for an overruled
    rule, where a shared sentence would say nothing about the rule that won)."""
    for row in TABLE:
        assert len(row.doc) >= 80 and row.doc.rstrip(")").endswith("."), row.id
    outranks = [r.outranks for r in TABLE if not r.fallback]
    shared = {text for text in outranks if outranks.count(text) > 1}
    assert not shared, shared
    assert len({r.doc for r in TABLE}) == len(TABLE)


def _example(name: str) -> Verdict:
    """The verdict of a row's example: a recorded bundle, or a bundle a fixture builds."""
    if name.startswith(FIXTURE_PREFIX):
        from tests.rule_fixtures import FIXTURES

        return classify(FIXTURES[name[len(FIXTURE_PREFIX) :]]())
    found = [p for p in _bundles() if p.stem == name]
    assert found, f"no recorded bundle {name}.json in samples/bundles or tests/golden/bundles"
    return classify(load_bundle(found[0]))


@pytest.mark.parametrize("row", TABLE, ids=lambda r: r.id)
def test_every_row_decides_its_examples(row: Rule) -> None:
    """A row's examples are captures it decides, so its doc is shown on a real case - and
    every row has one: a rule no capture reaches is dead code or untested reasoning. A
    fixture stands in only where no program on this machine can reach the rule (a GPU)."""
    assert row.examples, f"{row.id}: record a capture it decides (samples/run_scenarios.py)"
    fixtures = [n for n in row.examples if n.startswith(FIXTURE_PREFIX)]
    assert not fixtures or "test helpers" in row.doc, f"{row.id}: say why it has no recording"
    for name in row.examples:
        verdict = _example(name)
        assert verdict.rule == row.id, (name, verdict.rule, verdict.summary)
        assert verdict.state in row.gives | {"unknown"}, (name, verdict.state)


def test_the_state_is_data_not_a_prefix_of_the_sentence() -> None:
    """A decision carries its state as a field and its sentence without it; the summary is
    composed from the two (``wording.summary_of``). No string in ``diag/verdict`` opens with a
    state ("deadlocked: ..."), so none is written with it inside to be stripped back out."""
    decision = decided("idle", 0.5, "waiting")
    assert (decision.state, decision.text, decision.summary) == ("idle", "waiting", "idle: waiting")
    opens = re.compile("^(?:" + "|".join(STATES) + "): ")
    found = []
    for path in sorted((Path(__file__).resolve().parents[1] / "diag" / "verdict").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(n)
        }
        inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for n in ast.walk(tree):
            head = n.values[0] if isinstance(n, ast.JoinedStr) and n.values else n
            text = head.value if isinstance(head, ast.Constant) else None
            if id(n) in docs or id(n) in inner or not isinstance(text, str):
                continue
            if opens.match(text):
                found.append(f"{path.name}:{n.lineno}: {text[:40]!r}")
    assert not found, found


def test_every_recorded_capture_is_decided_as_the_table_says() -> None:
    lines = []
    for path in _bundles():
        verdict = classify(load_bundle(path))
        assert verdict.rule, path.name
        assert verdict.summary.startswith(f"{verdict.state}: "), verdict.summary
        if verdict.rule in _ROWS:
            gives = _ROWS[verdict.rule].gives | {"unknown"}  # one snapshot: unknown
            assert verdict.state in gives, (path.name, verdict.rule, verdict.state)
        assert not verdict.problems, (path.name, verdict.problems)
        lines.append(_line(path.stem, verdict))
    text = "\n".join(lines) + "\n"
    if UPDATE:
        GOLDEN.write_text(text)
    assert GOLDEN.exists(), "no golden rule table: DIAG_UPDATE_GOLDEN=1 and review"
    assert text == GOLDEN.read_text(), "the rule table changed: review, then DIAG_UPDATE_GOLDEN=1"


def test_a_rule_that_raises_is_recorded_and_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in one rule costs that rule, not the verdict, and the verdict says so."""
    import diag.verdict.rules as rules

    first = TABLE[0]

    def broken(s: object) -> None:
        raise RuntimeError("boom")

    broken.__name__ = first.id
    table = (rules.Rule(**{**first.__dict__, "decide": broken}), *TABLE[1:])
    monkeypatch.setattr(rules, "TABLE", table)
    path = REPO / "samples" / "bundles" / "gloo_rank_dies.json"
    classify_mod = sys.modules["diag.verdict.classify"]  # the package exports the function
    monkeypatch.setattr(classify_mod, "apply", lambda s: apply(s, table))
    verdict = classify_mod.classify(load_bundle(path))
    assert any("rule rank_died failed" in p and "boom" in p for p in verdict.problems)
    assert verdict.rule != "rank_died"
    assert "judged with part of the verdict missing" in verdict.summary


def test_a_graph_that_raises_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the wait-for graph turns off the rules that read it: recorded, not silent."""
    classify_mod = sys.modules["diag.verdict.classify"]

    def broken(*args: object) -> None:
        raise KeyError("node")

    monkeypatch.setattr(classify_mod, "wait_graph", broken)
    verdict = classify_mod.classify(load_bundle(REPO / "samples" / "bundles" / "http_idle.json"))
    assert verdict.graph is None
    assert verdict.problems and "the wait-for graph failed: KeyError" in verdict.problems[0]
    assert "chains_never_end" in verdict.problems[0]
    assert verdict.state == "idle"


def test_the_report_shows_the_deciding_rule_and_the_runners_up() -> None:
    """The HTML and the Markdown say which rule decided and which later ones matched, with why
    each was overruled - the verdict's why beyond its sentence."""
    import msgspec

    from diag.render.build import build_view
    from diag.render.html import render_html
    from diag.render.markdown import render_markdown

    bundle = load_bundle(REPO / "samples" / "bundles" / "vllm_engine_sigstop.json")
    bundle = msgspec.structs.replace(bundle, verdict=classify(bundle))
    view = build_view(bundle, bundle.verdict, "bundle")
    md = render_markdown(view)
    assert "**Decided by** `rank_stopped`; also matched: output_moves → progressing" in md
    assert "(overruled: a stopped or dead process owes its peers" in md
    html = render_html(view)
    assert "decided by <code>rank_stopped</code>; also matched: output_moves" in html


def test_every_evidence_signal_is_in_the_vocabulary() -> None:
    """``Evidence.signal`` is stored as a string (old bundles stay readable), so the closed set
    is checked here: every signal the verdict gives on the recorded captures is a known one."""
    from diag.vocab import EVIDENCE_SIGNALS

    for path in _bundles():
        for ev in classify(load_bundle(path)).evidence:
            assert ev.signal in EVIDENCE_SIGNALS, (path.name, ev.signal)


def test_an_old_death_line_does_not_outrank_a_job_that_progresses() -> None:
    """An elastic job restarted with fewer ranks, its log appended across runs: torchrun's
    line about rank 3 is still in the tail, rank 3 is no process any more, and the ranks that
    are log new steps - history, not why it hangs (it does not)."""
    from tests.series import build
    from tests.test_classify import TRAIN_A, TRAIN_B, ranks

    dead = "failed (exitcode: -9) local_rank: 3 (pid: 4242) of binary: /usr/bin/python"
    steps = [f"step {40 + i} loss 1.{i}" for i in range(6)]
    log = [(5000 + 200 * i, 50 + 2 * i, (dead, *steps[: 2 * i + 1])) for i in range(3)]
    procs = ranks(
        4, stack=[TRAIN_A, TRAIN_B, TRAIN_A], cpu_pct=90.0, state="R", wchan="0", syscall="running"
    )[:3]
    verdict = classify(build(procs, logs={"/job/train.log": log}))
    assert verdict.state == "progressing", verdict.summary
    assert verdict.rule != "log_names_dead_rank"
