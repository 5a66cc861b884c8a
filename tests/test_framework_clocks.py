"""Framework clocks (#33): every clock a pack declares, set to a non-default value in argv or
env, is read back with its budget and where it was set, and - for the clocks that count from
a process's start or from a collective - as a countdown in the verdict of a recorded job
edited to carry the setting (recorded-bundle variants: the real frameworks' processes are
recorded in samples/bundles; tests/test_sglang_real.py and test_vllm_real.py show the same on
live servers)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, Tuple

import pytest

from diag.frameworks import union
from diag.model import ProcessInfo
from diag.verdict import classify
from diag.verdict.startup_timeouts import timeouts_of
from tests.recorded_variants import BUNDLES, Json, load_variant

# (clock name, the process's argv and env setting it, the budget expected in seconds)
SETTINGS: Tuple[Tuple[str, Tuple[str, ...], Dict[str, str], float], ...] = (
    ("SGLang's watchdog", ("python", "-m", "sglang.launch_server", "--watchdog-timeout", "700"),
     {}, 700.0),
    ("vLLM's engine-ready timeout", ("vllm", "serve", "m"),
     {"VLLM_ENGINE_READY_TIMEOUT_S": "900"}, 900.0),
    ("vLLM's RPC timeout", ("vllm", "serve", "m"), {"VLLM_RPC_TIMEOUT": "120000"}, 120.0),
    ("vLLM's engine iteration timeout", ("vllm", "serve", "m"),
     {"VLLM_ENGINE_ITERATION_TIMEOUT_S": "90"}, 90.0),
    ("torch's NCCL heartbeat monitor", ("python", "train.py"),
     {"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "240"}, 240.0),
    ("torchrun's rendezvous join timeout",
     ("torchrun", "--nnodes=1:2", "--rdzv_conf", "join_timeout=900,last_call_timeout=45", "t.py"),
     {}, 900.0),
    ("torchrun's rendezvous last call",
     ("torchrun", "--nnodes=1:2", "--rdzv-conf=join_timeout=900,last_call_timeout=45", "t.py"),
     {}, 45.0),
    ("DeepSpeed's process-group timeout", ("python", "train.py"), {"DEEPSPEED_TIMEOUT": "45"},
     2700.0),
    ("Ray Train's worker health-check timeout", ("python", "train.py"),
     {"RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S": "120"}, 120.0),
    ("Ray Train's worker-group start timeout", ("python", "train.py"),
     {"RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "240"}, 240.0),
    ("Ray Train's collective timeout", ("python", "train.py"),
     {"RAY_TRAIN_COLLECTIVE_TIMEOUT_S": "300"}, 300.0),
)  # fmt: skip


@pytest.mark.parametrize("name,argv,env,seconds", SETTINGS, ids=[s[0] for s in SETTINGS])
def test_each_clock_set_is_read_back(
    name: str, argv: Tuple[str, ...], env: Dict[str, str], seconds: float
) -> None:
    info = ProcessInfo(pid=1, name=argv[0], cmdline=argv, env=env)
    got = {t.who: t for t in timeouts_of(info)}
    assert name in got, sorted(got)
    assert got[name].seconds == pytest.approx(seconds)
    value = next(iter(env.values()), None) or ("700" if "700" in argv else "")
    assert got[name].set_by and (value in got[name].set_by or "timeout=" in got[name].set_by)


def test_every_settable_clock_is_covered() -> None:
    """A clock a pack adds with a flag or env variable gets a row above."""
    settable = {c.name for _, c in union.CLOCKS if c.argv_flag or c.env}
    assert settable <= {s[0] for s in SETTINGS} | {"Slurm's time limit"}


def test_unset_opt_in_clocks_stay_off() -> None:
    """Ray Train's collective timeout is off unless set (-1 turns it off too)."""
    for env in ({}, {"RAY_TRAIN_COLLECTIVE_TIMEOUT_S": "-1"}):
        info = ProcessInfo(pid=1, cmdline=("python", "t.py"), env=env)
        assert "Ray Train's collective timeout" not in {t.who for t in timeouts_of(info)}


def _recorded(name: str) -> Json:
    data: Json = json.loads((BUNDLES / f"{name}.json").read_text())
    data.pop("verdict", None)
    return data


def _summary(data: Json, tmp_path: Path) -> str:
    return classify(load_variant(data, tmp_path)).summary


def test_sglang_watchdog_countdown_beside_the_eta(tmp_path: Path) -> None:
    """A real SGLang weight load (recorded), its main process started with
    ``--watchdog-timeout 700``: the watchdog's countdown sits beside the load's ETA."""
    data = _recorded("sglang_real_weight_load")
    main = next(p for p in data["processes"] if "sglang.launch_server" in p["cmdline"])
    main["cmdline"] += ["--watchdog-timeout", "700"]
    summary = _summary(data, tmp_path)
    assert "ETA ~20 s" in summary, summary
    want = r"SGLang's watchdog \(11 min 40 s, set by `--watchdog-timeout=700`\) kills it in ~\d+"
    assert re.search(want + r" min - after the ETA \(~20 s\): it will make it", summary), summary


def test_vllm_engine_ready_timeout_read_in_startup(tmp_path: Path) -> None:
    """``vllm serve`` starting (recorded) with ``VLLM_ENGINE_READY_TIMEOUT_S=900``: read back,
    and said not to bound this start-up (its wait for the engine has no timeout)."""
    data = _recorded("vllm_startup_api")
    data["processes"][0]["env"]["VLLM_ENGINE_READY_TIMEOUT_S"] = "900"
    summary = _summary(data, tmp_path)
    assert (
        "vLLM's engine-ready timeout (15 min 0 s, set by `VLLM_ENGINE_READY_TIMEOUT_S=900`) "
        "does not count during this start-up"
    ) in summary, summary


def test_torchrun_and_ray_train_start_clocks_count_down(tmp_path: Path) -> None:
    """A gloo job converting weights (recorded), its launcher a torchrun with
    ``--rdzv-conf join_timeout=900,last_call_timeout=45`` and Ray Train's worker-group start
    timeout in its ranks' env: each counts from its process's start."""
    data = _recorded("gloo_load_dequant")
    launcher = data["processes"][0]
    launcher["cmdline"] = [
        "torchrun", "--nnodes=1:2", "--rdzv-conf", "join_timeout=900,last_call_timeout=45",
        "gloo_load_dequant.py",
    ]  # fmt: skip
    for p in data["processes"][1:]:
        p["env"]["RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"] = "240"
    summary = _summary(data, tmp_path)
    assert re.search(
        r"torchrun's rendezvous last call \(45 s, set by `last_call_timeout=45`\) starts "
        r"without the nodes still missing in ~\d+ s",
        summary,
    ), summary
    assert re.search(
        r"Ray Train's worker-group start timeout \(4 min 0 s, set by "
        r"`RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S=240`\) fails start-up in ~\d+ min",
        summary,
    ), summary
    assert re.search(
        r"torchrun's rendezvous join timeout \(15 min 0 s, set by `join_timeout=900`\) fails "
        r"start-up in ~1\d min",
        summary,
    ), summary


def test_deepspeed_timeout_counts_down_a_collective_wait(tmp_path: Path) -> None:
    """A deadlocked gloo job (recorded) whose ranks last ran 10 min ago, ``DEEPSPEED_TIMEOUT=45``
    in their env: DeepSpeed's process-group timeout replaces torch's 30-min default in the
    countdown of the waiting ranks."""
    data = _recorded("gloo_retry_never_ready")
    for p in data["processes"]:
        p["env"]["DEEPSPEED_TIMEOUT"] = "45"
    for ps in data["samples"][-1]["processes"]:
        for t in ps["threads"]:
            if t["tid"] == ps["pid"]:
                t["off_cpu_s"] = 600.0
    summary = _summary(data, tmp_path)
    assert summary.startswith("deadlocked"), summary
    assert "have not run for 10 min 0 s" in summary, summary
    assert (
        "DeepSpeed's process-group timeout (45 min 0 s, set by `DEEPSPEED_TIMEOUT=45`) fails "
        "the waiting ranks in ~35 min"
    ) in summary, summary
    assert "gloo collective timeout" not in summary, summary
