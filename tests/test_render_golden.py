"""Golden tests: recorded bundles → view-model JSON and Markdown, byte for byte.

The bundles under tests/golden/bundles/ were recorded with ``diag capture`` from the real test
programs (a gloo job whose last rank never joins the all_reduce, a launcher with a zombie rank,
threads parked on two locks); samples/bundles/ holds the verdict helper's recordings; the
synthetic ones come from bench/synth.py. The view is built with the verdict stored in the
bundle, so a classifier change does not churn these files - only a report change does.
Regenerate after an intended change with ``DIAG_UPDATE_GOLDEN=1 pytest tests/test_render_golden.py``
and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

import msgspec
import pytest

from bench.synth import make_bundle
from diag.bundle.io import load_bundle
from diag.model import Bundle
from diag.render.build import build_view
from diag.render.markdown import render_markdown
from tests.conftest import REPO

GOLDEN = REPO / "tests" / "golden"
UPDATE = os.environ.get("DIAG_UPDATE_GOLDEN") == "1"


def _recorded() -> List[Tuple[str, Path, Path]]:
    """(id, bundle, golden dir): our recordings, then samples/bundles/ if present."""
    out = [(p.stem, p, GOLDEN / "recorded") for p in sorted((GOLDEN / "bundles").glob("*.json"))]
    samples = REPO / "samples" / "bundles"
    out += [(f"samples-{p.stem}", p, GOLDEN / "samples") for p in sorted(samples.glob("*.json"))]
    return out


def _check(name: str, bundle: Bundle, folder: Path, strict: bool = True) -> None:
    view = build_view(bundle, bundle.verdict, "bundle" if bundle.verdict else "none")
    got = {
        ".view.json": msgspec.json.format(msgspec.json.encode(view), indent=1).decode() + "\n",
        ".md": render_markdown(view),
    }
    for suffix, text in got.items():
        path = folder / f"{name}{suffix}"
        if UPDATE:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            continue
        if not path.exists() and not strict:
            pytest.skip(f"no golden file {path.name} yet: run DIAG_UPDATE_GOLDEN=1 and review")
        assert path.exists(), f"missing {path}: run DIAG_UPDATE_GOLDEN=1 and review the diff"
        assert text == path.read_text(), f"{path.name} changed: DIAG_UPDATE_GOLDEN=1 to accept"


@pytest.mark.parametrize(("name", "bundle_path", "folder"), _recorded(), ids=lambda v: str(v))
def test_recorded_bundle_matches_golden(name: str, bundle_path: Path, folder: Path) -> None:
    _check(name, load_bundle(bundle_path), folder, strict=folder.name == "recorded")


SYNTH: Dict[str, Dict[str, Any]] = {
    "synth-deadlock-4x6x12": {"ranks": 4, "threads": 6, "samples": 12},
    "synth-progressing-2hosts": {
        "ranks": 4,
        "threads": 4,
        "samples": 6,
        "scenario": "progressing",
        "hosts": 2,
        "gpus": False,
    },
}


@pytest.mark.parametrize("name", sorted(SYNTH))
def test_synthetic_bundle_matches_golden(name: str) -> None:
    _check(name, make_bundle(**SYNTH[name]), GOLDEN / "synth")
