"""The majority rule of poll loops, on real SGLang recordings: an idle scheduler caught once in
another step of its own loop's iteration (``get_next_batch_to_run`` picking no batch) still
polls across the window - its CPU is no work and its bytes no output - while a scheduler caught
in a forward, or off the poll path in most samples, or under a frame far from its receive step,
does not.

The variants edit one sample of a recording (``samples/bundles``): the stray stack is real
SGLang 0.5.23, as live TP 2 captures caught it (``EnvField.get`` <-
``maybe_convert_decode_to_extend`` <- ``get_next_batch_to_run``, 5 frames below
``event_loop_overlap``). Before the rule, a TP 2 rank caught there once, once in ``on_idle``
and once in the broadcast - in the handout once in three, no follower of the loop either - read
"progressing: scheduler TP1 keeps writing output (228.6 KiB in 4.0 s)": its gloo chatter, ~50
bytes a write. 3 of 20 live idle TP 2 captures here; all 20 read idle with it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from conftest import REPO
from series import Proc, build

from diag.bundle.io import load_bundle
from diag.model import Bundle
from diag.verdict.classify import classify
from diag.verdict.features import ProcSignals, extract
from diag.verdict.work import computes, output_bytes, with_job_context

BUNDLES = REPO / "samples" / "bundles"
SITE = "/work/main/.venv-sglang/lib/python3.11/site-packages/"
LOOP = "Scheduler.event_loop_overlap"
Json = Dict[str, Any]


def _frame(name: str, path: str, line: int) -> Json:
    return {"name": name, "filename": SITE + path, "line": line}


DECORATORS = [
    _frame(
        "profile_method.<locals>.decorator.<locals>.wrapper", "sglang/srt/utils/nvtx_utils.py", 109
    ),
    _frame(
        "scheduler_stage_method.<locals>.decorator.<locals>.wrapper",
        "sglang/srt/observability/scheduler_stage_metrics.py",
        186,
    ),
]
BATCH_PICK = [  # the loop picking no batch: a flag read under get_next_batch_to_run
    _frame("EnvField.get", "sglang/srt/environ.py", 68),
    _frame(
        "SchedulerDPAttnAdapter.maybe_convert_decode_to_extend",
        "sglang/srt/managers/scheduler_components/dp_attn.py",
        784,
    ),
    _frame("Scheduler.get_next_batch_to_run", "sglang/srt/managers/scheduler.py", 4014),
    *DECORATORS,
]
FORWARD = [  # the same loop running a batch (sglang_real_load's scheduler)
    _frame(
        "ForwardBatch._forward_num_tokens", "sglang/srt/model_executor/forward_batch_info.py", 2135
    ),
    _frame("ModelRunner.forward", "sglang/srt/model_executor/model_runner.py", 1860),
    _frame("TpModelWorker.forward_batch_generation", "sglang/srt/managers/tp_worker.py", 675),
    _frame("Scheduler.run_batch", "sglang/srt/managers/scheduler.py", 4704),
    *DECORATORS,
]


def _json(name: str) -> Json:
    data: Json = json.loads((BUNDLES / f"{name}.json").read_text())
    return data


def _main(data: Json, index: int, pid: int) -> Json:
    proc = next(p for p in data["samples"][index]["processes"] if p["pid"] == pid)
    thread: Json = next(t for t in proc["threads"] if t["tid"] == pid)
    return thread


def _frames(data: Json, index: int, pid: int) -> List[Json]:
    frames: List[Json] = data["stacks"][_main(data, index, pid)["stack_id"]]["frames"]
    return frames


def _put(data: Json, index: int, pid: int, frames: List[Json], state: str = "R") -> None:
    """Sample ``index`` of ``pid``'s main thread now shows ``frames``, running (or ``state``)."""
    stack_id = f"edited{len(data['stacks']):010d}"
    data["stacks"][stack_id] = {"frames": copy.deepcopy(frames)}
    thread = _main(data, index, pid)
    thread.update(stack_id=stack_id, state=state, syscall="running" if state == "R" else "futex")


def _under_loop(
    data: Json, index: int, pid: int, inner: List[Json], line: int = 2084
) -> List[Json]:
    """``inner`` called by the loop frame of that sample (``event_loop_overlap`` and outward)."""
    frames = _frames(data, index, pid)
    at = next(k for k, f in enumerate(frames) if f["name"] == LOOP)
    outer = copy.deepcopy(frames[at:])
    outer[0]["line"] = line
    return [*inner, *outer]


def _load(data: Json, tmp_path: Path) -> Bundle:
    path = tmp_path / "variant.json"
    path.write_text(json.dumps(data))
    return load_bundle(path)


def _signals(bundle: Bundle) -> Dict[int, ProcSignals]:
    return {p.pid: p for p in with_job_context(extract(bundle))}


def _schedulers(data: Json) -> List[int]:
    return [p["pid"] for p in data["processes"] if "scheduler" in " ".join(p.get("cmdline", []))]


def _assert_polls(p: ProcSignals, strays: Optional[int] = None) -> None:
    assert p.poll is not None, p.main_wait
    assert not computes(p) and output_bytes(p, {}) == 0
    if strays is not None:
        assert p.poll.strays == strays


# -- recorded ----------------------------------------------------------------------------------


def test_recorded_tp2_idle_schedulers_poll_and_write_no_output() -> None:
    bundle = load_bundle(BUNDLES / "sglang_real_tp2_idle.json")
    procs = _signals(bundle)
    for pid in _schedulers(_json("sglang_real_tp2_idle")):
        _assert_polls(procs[pid])
    assert classify(bundle).state == "idle"


def test_recorded_load_scheduler_is_no_poll_loop() -> None:
    """Two samples of three in run_batch/forward, one in get_next_batch_to_run: a busy server."""
    bundle = load_bundle(BUNDLES / "sglang_real_load.json")
    (pid,) = _schedulers(_json("sglang_real_load"))
    p = _signals(bundle)[pid]
    assert p.poll is None and computes(p)
    assert classify(bundle).state == "progressing"


# -- one sample in the batch pick ----------------------------------------------------------------


@pytest.mark.parametrize("index", [0, 1, 2])
def test_tp1_scheduler_caught_once_in_the_batch_pick_still_polls(
    index: int, tmp_path: Path
) -> None:
    """TP 1 idle: on_idle, the receive step, on_idle - one of them replaced by the batch pick."""
    data = _json("sglang_real_idle")
    (pid,) = _schedulers(data)
    _put(data, index, pid, _under_loop(data, index, pid, BATCH_PICK))
    bundle = _load(data, tmp_path)
    _assert_polls(_signals(bundle)[pid], strays=1)
    assert classify(bundle).state == "idle"


@pytest.mark.parametrize("rank", [0, 1])
def test_tp2_rank_caught_in_the_batch_pick_on_idle_and_the_broadcast_reads_idle(
    rank: int, tmp_path: Path
) -> None:
    """The live miss: one rank caught once in the batch pick, once in ``on_idle`` (publishing
    its load snapshot), once in the empty batch's broadcast. In the handout once in three, it
    follows no one; its poll samples are the majority, the stray the same loop's iteration."""
    data = _json("sglang_real_tp2_idle")
    pid = _schedulers(data)[rank]
    idle = _json("sglang_real_idle")
    on_idle = _frames(
        idle, 0, _schedulers(idle)[0]
    )  # get_loads <- publish_load_snapshot <- on_idle
    _put(data, 0, pid, _under_loop(data, 0, pid, BATCH_PICK))
    _put(data, 1, pid, on_idle)
    bundle = _load(data, tmp_path)
    procs = _signals(bundle)
    _assert_polls(procs[pid], strays=1)
    verdict = classify(bundle)
    assert verdict.state == "idle", verdict.summary
    assert "healthy, waiting for " in verdict.summary


@pytest.mark.parametrize("index", [0, 1, 2])
def test_tp2_rank_0_caught_once_in_the_batch_pick_reads_idle(index: int, tmp_path: Path) -> None:
    data = _json("sglang_real_tp2_idle")
    pid = _schedulers(data)[0]
    _put(data, index, pid, _under_loop(data, index, pid, BATCH_PICK))
    bundle = _load(data, tmp_path)
    for p in _schedulers(data):
        _assert_polls(_signals(bundle)[p])
    assert classify(bundle).state == "idle"


# -- a sample without a stack, or caught in the loop's decorators ---------------------------------


@pytest.mark.parametrize("index", [0, 1, 2])
def test_tp1_scheduler_with_one_sample_unread_still_polls(index: int, tmp_path: Path) -> None:
    """Every reader torn by the busy-polling scheduler in one sample (no stack, py_status
    failed): that sample says nothing either way, the other two poll. It read "slow: CPU-bound"
    (samples/bundles/sglang_real_idle_stack_unread.json is such a live capture)."""
    data = _json("sglang_real_idle")
    (pid,) = _schedulers(data)
    proc = next(p for p in data["samples"][index]["processes"] if p["pid"] == pid)
    proc.update(py_status="failed", stack_reader=None)
    for thread in proc["threads"]:
        thread["stack_id"] = None
    bundle = _load(data, tmp_path)
    _assert_polls(_signals(bundle)[pid], strays=0)
    assert classify(bundle).state == "idle"


def test_a_thread_never_read_is_no_poll_loop(tmp_path: Path) -> None:
    data = _json("sglang_real_idle")
    (pid,) = _schedulers(data)
    for sample in data["samples"]:
        proc = next(p for p in sample["processes"] if p["pid"] == pid)
        proc.update(py_status="failed", stack_reader=None)
        for thread in proc["threads"]:
            thread["stack_id"] = None
    assert _signals(_load(data, tmp_path))[pid].poll is None


@pytest.mark.parametrize("wrappers", [DECORATORS[1:], DECORATORS])
def test_samples_in_the_decorators_of_on_idle_are_the_loop(
    wrappers: List[Json], tmp_path: Path
) -> None:
    """SGLang wraps ``on_idle`` and ``recv_requests`` in two decorators; a sample caught in
    them, nothing under them yet, is the loop calling its idle hook - no stray, also where no
    sample shows ``on_idle`` itself (both on_idle samples replaced: only the receive polls).
    Two such strays in three read "slow: CPU-bound in ..." (sglang_real_idle_in_decorator)."""
    data = _json("sglang_real_idle")
    (pid,) = _schedulers(data)
    for index in (0, 2):
        _put(data, index, pid, _under_loop(data, index, pid, wrappers, line=2123))
    bundle = _load(data, tmp_path)
    _assert_polls(_signals(bundle)[pid], strays=0)
    assert classify(bundle).state == "idle"


def test_samples_entering_the_receive_step_poll(tmp_path: Path) -> None:
    """The loop's receive step, ``ingest_requests`` (the SGLang pack's ``poll_frames``), caught
    running with only the decorators of ``recv_requests`` under it: the loop asking for work.
    Two such samples beside one in on_idle read "slow: CPU-bound in ...wrapper"
    (sglang_real_idle_entering_receive)."""
    data = _json("sglang_real_idle")
    (pid,) = _schedulers(data)
    ingest = _frame("Scheduler.ingest_requests", "sglang/srt/managers/scheduler.py", 2205)
    for index in (1, 2):
        _put(data, index, pid, _under_loop(data, index, pid, [DECORATORS[1], ingest], 2078))
    bundle = _load(data, tmp_path)
    _assert_polls(_signals(bundle)[pid], strays=0)
    assert classify(bundle).state == "idle"


# -- contrasts: what the rule does not forgive -----------------------------------------------------


def test_a_forward_between_polls_is_work(tmp_path: Path) -> None:
    data = _json("sglang_real_idle")
    (pid,) = _schedulers(data)
    _put(data, 1, pid, _under_loop(data, 1, pid, FORWARD, line=2109))
    bundle = _load(data, tmp_path)
    p = _signals(bundle)[pid]
    assert p.poll is None and computes(p)
    assert classify(bundle).state != "idle"


def test_decorators_over_a_forward_are_work(tmp_path: Path) -> None:
    """A wrapper is bookkeeping only with nothing under it: over a batch's run, it is work."""
    data = _json("sglang_real_idle")
    (pid,) = _schedulers(data)
    for index in (0, 2):
        _put(data, index, pid, _under_loop(data, index, pid, FORWARD, line=2109))
    assert _signals(_load(data, tmp_path))[pid].poll is None


def test_two_strays_in_three_samples_are_no_majority(tmp_path: Path) -> None:
    data = _json("sglang_real_idle")
    (pid,) = _schedulers(data)
    for index in (0, 1):
        _put(data, index, pid, _under_loop(data, index, pid, BATCH_PICK))
    p = _signals(_load(data, tmp_path))[pid]
    assert p.poll is None


def test_a_stray_under_a_frame_far_from_the_receive_step_is_not_the_loop(tmp_path: Path) -> None:
    """Sharing only ``run_scheduler_process`` and outward with the poll samples: no frame that
    calls the receive step - anything may run there."""
    data = _json("sglang_real_idle")
    (pid,) = _schedulers(data)
    frames = _frames(data, 1, pid)
    at = next(k for k, f in enumerate(frames) if f["name"] == "run_scheduler_process")
    elsewhere = [_frame("Scheduler.rebuild_cache", "sglang/srt/managers/scheduler.py", 900)]
    _put(data, 1, pid, [*elsewhere, *copy.deepcopy(frames[at:])])
    assert _signals(_load(data, tmp_path))[pid].poll is None


# -- the share: two thirds, three samples at least -------------------------------------------------

SCHED = "/venv/lib/python3.11/site-packages/engine/scheduler.py"
SITE_LOOP = (("event_loop_normal", SCHED), ("run_scheduler", SCHED))
ON_IDLE = (("get_loads", SCHED), ("Scheduler.on_idle", SCHED), *SITE_LOOP)
PICK = (("filter_batch", SCHED), ("select_batch", SCHED), *SITE_LOOP)  # no flag read


@pytest.mark.parametrize(
    "strays, samples, polls",
    [(1, 2, False), (1, 3, True), (1, 4, True), (2, 6, True), (3, 6, False), (3, 10, True)],
)
def test_two_thirds_of_the_samples_on_the_poll_path(strays: int, samples: int, polls: bool) -> None:
    stacks = [PICK] * strays + [ON_IDLE] * (samples - strays)
    sched = Proc(
        pid=200,
        stack=stacks,
        cpu_pct=98.0,
        state="R",
        wchan=None,
        syscall="running",
        ports=(30000,),
    )
    p = {p.pid: p for p in extract(build([sched], n=samples))}[200]
    assert (p.poll is not None) is polls
