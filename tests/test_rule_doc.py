"""docs/rules.md is the rule table's page, generated from its rows (``docs/make_rules.py``):
regenerated here and compared with the checked-in file, so a row added, moved or reworded
without its page fails CI."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from diag.verdict.rules import TABLE
from tests.conftest import REPO

_spec = importlib.util.spec_from_file_location("make_rules", REPO / "docs" / "make_rules.py")
assert _spec is not None and _spec.loader is not None
make_rules = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("make_rules", make_rules)
_spec.loader.exec_module(make_rules)


def test_the_checked_in_page_is_the_tables() -> None:
    text = make_rules.page()
    assert make_rules.PAGE.read_text(encoding="utf-8") == text, (
        "docs/rules.md is stale: run python docs/make_rules.py and review the diff"
    )


def test_the_page_has_every_row_in_order_with_its_examples_linked() -> None:
    text = make_rules.page()
    heads = [line.split(". ", 1)[1] for line in text.splitlines() if line.startswith("## ")]
    assert heads == [row.id for row in TABLE]
    for row in TABLE:
        assert row.doc in text and row.outranks in text
        for name in row.examples:
            assert f"[`{name}`](../" in text, name
    for target in {part.split(")")[0] for part in text.split("](../")[1:]}:
        assert (REPO / target).is_file(), target


def test_check_mode_says_when_the_page_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(make_rules, "PAGE", tmp_path / "rules.md")
    assert make_rules.main(["--check"]) == 1
    assert make_rules.main([]) == 0
    assert make_rules.main(["--check"]) == 0
