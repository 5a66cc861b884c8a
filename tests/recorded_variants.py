"""Edited copies of recorded ``explore_*`` bundles: a test changes one thing in the raw JSON
(a stack, a thread's state) and judges the variant, to show which evidence decides."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Dict, Iterator

from diag.bundle.io import load_bundle
from diag.model import Bundle, Verdict
from diag.verdict.classify import classify

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
Json = Dict[str, Any]


def recorded_json(name: str) -> Json:
    """``samples/bundles/<name>.json`` as JSON, without its recorded verdict."""
    data: Json = json.loads((BUNDLES / f"{name}.json").read_text())
    data.pop("verdict", None)
    return data


def explore_json(name: str) -> Json:
    """``samples/bundles/explore_<name>.json`` as JSON, without its recorded verdict."""
    return recorded_json(f"explore_{name}")


def edit_log_lines(data: Json, change: Callable[[str], str]) -> None:
    """Every log line (head and tail) of every sample, changed by ``change``."""
    for sample in data["samples"]:
        for log in sample["logs"]:
            for part in ("tail", "head"):
                if part in log:
                    log[part] = [change(x) for x in log[part]]


def load_variant(data: Json, tmp_path: Path) -> Bundle:
    path = tmp_path / "variant.json"
    path.write_text(json.dumps(data))
    return load_bundle(path)


def judge_variant(data: Json, tmp_path: Path) -> Verdict:
    """The verdict of an edited copy of a recording, judged now (not the one it stored)."""
    return classify(load_variant(data, tmp_path))


def threads_of(data: Json, tid: int) -> Iterator[Json]:
    """Thread ``tid``'s record in every sample."""
    for sample in data["samples"]:
        for ps in sample["processes"]:
            for t in ps["threads"]:
                if t["tid"] == tid:
                    yield t
