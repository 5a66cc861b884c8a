"""Work its scheduler can never place (``diag.verdict.infeasible``, the packs'
``infeasible_lines``): a Ray driver in ``ray.get`` on a task asking for a GPU no node has read
"a task was lost (a worker killed...) - kill and rerun"; the scheduler's own line says why, and
a rerun would wait the same. Without that line the lost-task story stands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from diag.bundle.io import load_bundle
from diag.frameworks import union
from diag.verdict.classify import classify
from diag.verdict.infeasible import infeasible
from diag.verdict.progress import LogGrowth

BUNDLES = Path(__file__).resolve().parents[1] / "samples" / "bundles"
Json = Dict[str, Any]
RAY_LINE = (
    "\x1b[33m(autoscaler +5s)\x1b[0m Error: No available node types can fulfill resource "
    "request {'CPU': 8.0}*1. Add suitable node types to this cluster to resolve this issue."
)


def _log(*tail: str) -> LogGrowth:
    return LogGrowth("/job/driver.log", (), 0, 0, (), 1, False, (), tail=tail)


def test_rays_line_is_its_packs_and_is_quoted_without_colour() -> None:
    assert union.INFEASIBLE_LINE.search(RAY_LINE)
    found = infeasible([_log("step 1", RAY_LINE)])
    assert found is not None and found.path == "/job/driver.log"
    assert found.line.startswith("No available node types") and "\x1b" not in found.line
    assert infeasible([_log("Warning: the task is slow", "step 2")]) is None


def test_recorded_task_that_never_fits_names_the_scheduler_not_a_lost_task() -> None:
    v = classify(load_bundle(BUNDLES / "ray_task_never_fits.json"))
    assert (v.state, v.rule) == ("deadlocked", "results_never_come"), v.summary
    assert "can never be scheduled" in v.summary and "fulfill resource request" in v.summary
    assert "a task was lost" not in v.summary and "OOM" not in v.summary
    assert "num_gpus" in v.summary


def test_without_the_schedulers_line_the_lost_task_story_stands(tmp_path: Path) -> None:
    data: Json = json.loads((BUNDLES / "ray_task_never_fits.json").read_text())
    data.pop("verdict", None)
    for sample in data["samples"]:
        for log in sample["logs"]:
            for part in ("tail", "head"):
                if part in log:
                    log[part] = [x for x in log[part] if "fulfill resource" not in x]
    path = tmp_path / "variant.json"
    path.write_text(json.dumps(data))
    v = classify(load_bundle(path))
    assert (v.state, v.rule) == ("deadlocked", "results_never_come"), v.summary
    assert "a task was lost" in v.summary


def test_recorded_task_that_fits_computes() -> None:
    v = classify(load_bundle(BUNDLES / "ray_task_fits.json"))
    assert v.state in ("slow", "progressing"), v.summary
