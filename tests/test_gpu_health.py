"""GPU throttling and faults (issue #37) through diag's NVML worker: clock-event reasons, SM
clock against its ceiling, XIDs, ECC, retired pages / remapped rows, PCIe replays.

No GPU here: the fake NVML (tests/fake_nvml/pynvml.py) serves the fields. So that the fake
cannot drift from the real binding, every name it defines and every NVML call or constant the
worker uses is checked against the installed ``nvidia-ml-py`` package's pynvml.py - names and
constant values - and diag's clock-event table against the binding's reason bits.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, Sequence

import pytest
from conftest import FAKE_NVML, PROGRAMS, REPO, run_diag

from diag.bundle.io import load_bundle
from diag.model import CLOCK_EVENT_BITS, Bundle, GpuDevice, GpuXid, clock_event_names
from diag.probes.gpu import nvml_worker
from diag.probes.gpu.probe import GpuProbe, read_gpu
from diag.verdict.classify import classify
from tests.rule_fixtures import ALL_REDUCE, SYNC, gpu_fell_off_bus, gpu_ranks, h100, with_gpus
from tests.series import Proc, build


def _fake_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fake_pynvml", FAKE_NVML / "pynvml.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _real() -> ModuleType:
    real = pytest.importorskip("pynvml")  # nvidia-ml-py, a dependency of diag
    assert Path(real.__file__ or "").resolve().parent != FAKE_NVML.resolve()
    return real


def test_every_name_of_the_fake_is_the_real_bindings() -> None:
    real, fake = _real(), _fake_module()
    own = {"NVMLError", "POWER_LIMIT_W", "MEM_TOTAL_BYTES", "SM_CLOCK_MAX_MHZ"}
    names = [
        n for n in vars(fake) if (n.startswith("nvml") or n.startswith("NVML")) and n not in own
    ]
    assert "nvmlDeviceGetCurrentClocksEventReasons" in names and len(names) > 30
    missing = [n for n in names if not hasattr(real, n)]
    assert missing == []
    for name in names:
        value = getattr(fake, name)
        if isinstance(value, int):
            assert getattr(real, name) == value, name
    for cls in ("NVMLError_DriverNotLoaded", "NVMLError_LibraryNotFound", "NVMLError_GpuIsLost"):
        assert hasattr(real, cls), cls


def test_every_call_and_constant_the_worker_uses_is_the_real_bindings() -> None:
    real = _real()
    source = (REPO / "diag" / "probes" / "gpu" / "nvml_worker.py").read_text()
    used = set(re.findall(r"nvml\.(\w+)", source)) | set(nvml_worker._CLOCK_EVENT_CALLS)
    assert {"nvmlEventSetWait_v2", "nvmlDeviceGetRemappedRows"} <= used
    assert sorted(n for n in used if not hasattr(real, n)) == []
    assert real.NVML_ERROR_FUNCTION_NOT_FOUND == nvml_worker._FUNCTION_NOT_FOUND
    assert real.NVML_ERROR_TIMEOUT == nvml_worker._TIMEOUT


def test_clock_event_bits_are_the_bindings() -> None:
    real = _real()
    spelled = {
        "gpu_idle": "GpuIdle",
        "applications_clocks": "ApplicationsClocksSetting",
        "sw_power_cap": "SwPowerCap",
        "hw_slowdown": "HwSlowdown",
        "sync_boost": "SyncBoost",
        "sw_thermal_slowdown": "SwThermalSlowdown",
        "hw_thermal_slowdown": "HwThermalSlowdown",
        "hw_power_brake": "HwPowerBrakeSlowdown",
        "display_clocks": "DisplayClockSetting",
        "board_limit": "BoardLimit",
        "reliability": "Reliability",
    }
    for name, bit in CLOCK_EVENT_BITS:
        event = getattr(real, f"nvmlClocksEventReason{spelled[name]}", None)
        throttle = getattr(real, f"nvmlClocksThrottleReason{spelled[name]}")
        assert throttle == bit, name
        assert event in (None, bit), name  # the newest bits have only the older spelling
    assert clock_event_names(0x44) == ("sw_power_cap", "hw_thermal_slowdown")
    assert clock_event_names(0) == () and clock_event_names(None) == ()


def _devices(fields: Dict[str, Any]) -> str:
    return json.dumps(fields)


def test_throttle_reasons_and_faults_reach_the_sample(fake_nvml: pytest.MonkeyPatch) -> None:
    fake_nvml.setenv("FAKE_NVML_COUNT", "2")
    fake_nvml.setenv(
        "FAKE_NVML_DEVICES",
        _devices(
            {
                "1": {
                    "clock_event_mask": 0x40 | 0x4,
                    "sm_clock_mhz": 1100,
                    "xids": [79],
                    "ecc_volatile_uncorrected": 2,
                    "ecc_aggregate_uncorrected": 5,
                    "ecc_volatile_corrected": 120,
                    "remapped_rows": [3, 1, 1, 0],
                    "pcie_replays": 17,
                }
            }
        ),
    )
    sample = read_gpu(timeout_s=20)
    assert sample.available
    calm, hot = sample.devices
    assert calm.clock_event_mask == 0 and calm.sm_clock_mhz == calm.sm_clock_max_mhz == 1980
    assert calm.xids == () and calm.ecc_volatile_uncorrected == 0 and calm.pcie_replays == 0
    assert clock_event_names(hot.clock_event_mask) == ("sw_power_cap", "hw_thermal_slowdown")
    assert hot.sm_clock_mhz == 1100 and hot.sm_clock_max_mhz == 1980
    assert [x.xid for x in hot.xids] == [79] and hot.xids[0].t_s > 0
    assert (hot.ecc_volatile_uncorrected, hot.ecc_aggregate_uncorrected) == (2, 5)
    assert hot.ecc_volatile_corrected == 120
    assert (hot.remapped_rows_correctable, hot.remapped_rows_uncorrectable) == (3, 1)
    assert hot.remap_pending is True and hot.remap_failed is False
    assert hot.pcie_replays == 17
    # An H100 remaps rows; it retires no pages: NVML says Not Supported, kept by name.
    assert hot.retired_pages_dbe is None and hot.unread == {"retired_pages": "Not Supported"}


def test_a_refused_field_fails_alone(fake_nvml: pytest.MonkeyPatch) -> None:
    fake_nvml.setenv("FAKE_NVML_COUNT", "1")
    fake_nvml.setenv("FAKE_NVML_REFUSE", "ecc:3,pcie_replays:4,events:4,clock_events:4")
    fake_nvml.setenv("FAKE_NVML_DEVICES", _devices({"0": {"retired_pages_dbe": 2}}))
    (dev,) = read_gpu(timeout_s=20).devices
    assert dev.unread == {
        "clock_events": "Insufficient Permissions",
        "ecc": "Not Supported",
        "pcie_replays": "Insufficient Permissions",
        "xids": "Insufficient Permissions",
    }
    assert dev.ecc_volatile_uncorrected is None and dev.pcie_replays is None
    assert dev.clock_event_mask is None
    # the fields around them were read
    assert dev.sm_clock_max_mhz == 1980 and dev.power_w == 310.0
    assert (dev.retired_pages_dbe, dev.retired_pages_sbe) == (2, 0)
    assert dev.retired_pages_pending is False and dev.remapped_rows_correctable == 0


def test_an_older_driver_answers_through_the_throttle_reasons_call(
    fake_nvml: pytest.MonkeyPatch,
) -> None:
    fake_nvml.setenv("FAKE_NVML_COUNT", "1")
    fake_nvml.setenv("FAKE_NVML_OLD_DRIVER", "1")
    fake_nvml.setenv("FAKE_NVML_DEVICES", _devices({"0": {"clock_event_mask": 0x8}}))
    (dev,) = read_gpu(timeout_s=20).devices
    assert clock_event_names(dev.clock_event_mask) == ("hw_slowdown",)
    assert "clock_events" not in dev.unread


def test_an_xid_is_reported_once_by_the_read_after_it(fake_nvml: pytest.MonkeyPatch) -> None:
    """The worker keeps its event set over the capture: an XID arriving before the second
    read is in that read alone (polled, never waited for)."""
    fake_nvml.setenv("FAKE_NVML_COUNT", "2")
    fake_nvml.setenv("FAKE_NVML_DEVICES", _devices({"0": {"xids": [48, 63], "xids_at": 2}}))
    probe = GpuProbe(timeout_s=20)
    try:
        reads = [probe.read() for _ in range(3)]
    finally:
        probe.close()
    assert [[x.xid for x in r.devices[0].xids] for r in reads] == [[], [48, 63], []]
    assert all(r.devices[1].xids == () for r in reads)


def test_xids_are_bounded_per_read(fake_nvml: pytest.MonkeyPatch) -> None:
    fake_nvml.setenv("FAKE_NVML_COUNT", "1")
    many = list(range(1, 41))
    fake_nvml.setenv("FAKE_NVML_DEVICES", _devices({"0": {"xids": many}}))
    probe = GpuProbe(timeout_s=20)
    try:
        first, second = probe.read(), probe.read()
    finally:
        probe.close()
    cap = nvml_worker.MAX_XIDS_PER_READ
    assert [x.xid for x in first.devices[0].xids] == many[:cap]
    assert [x.xid for x in second.devices[0].xids] == many[cap : 2 * cap]


# --- the verdict: a throttled GPU names its rank as the straggler; a fallen GPU is a death ---


def _training(world: int, gpus: Sequence[Sequence[GpuDevice]], odd: int = -1) -> Bundle:
    """A data-parallel job whose log moves (steps), every rank caught in ``all_reduce`` or
    in its forward pass alike - as on a GPU job, where each rank's CPU waits in the same
    synchronising call whichever GPU is slow - unless ``odd`` computes at 4x the CPU."""
    compute = (
        ("forward", "/job/model.py"),
        ("train_step", "/job/train.py"),
        ("main", "/job/train.py"),
    )
    procs = [
        Proc(
            pid=100 + r,
            rank=r,
            world_size=world,
            rank_source="env:RANK",
            stack=[compute] * 3 if r == odd else [ALL_REDUCE, compute, ALL_REDUCE],  # type: ignore[list-item]
            cpu_pct=95.0 if r == odd else 22.0,
            state="R",
        )
        for r in range(world)
    ]
    log = [(1000 + 200 * i, 10 + 2 * i, (f"step {10 + 2 * i} loss 1.{i}",)) for i in range(3)]
    return with_gpus(build(procs, logs={"/job/train.log": log}), gpus)


HW_THERMAL = 0x40
SW_POWER_CAP = 0x4


def test_a_throttled_gpu_names_its_rank_as_the_straggler_with_the_cause() -> None:
    gpus = [h100(r, 100 + r) for r in range(3)]
    gpus.append(h100(3, 103, sm_clock_mhz=1100, clock_event_mask=HW_THERMAL, power_w=390.0))
    verdict = classify(_training(4, [gpus]))
    assert verdict.state == "progressing", verdict.summary
    assert verdict.stragglers is not None and verdict.stragglers.basis == "gpu-throttle"
    assert verdict.stragglers.suspects == (3,)
    cause = "rank 3 - its GPU 3 runs at 1,100 of 1,980 MHz, throttled by HW thermal slowdown"
    assert cause in verdict.summary, verdict.summary
    assert "(the other ranks' GPUs at 1,980 MHz)" in verdict.summary
    assert "check its cooling" in verdict.summary
    assert [s.rank for s in verdict.suspects] == [3]
    gpu_lines = [e.detail for e in verdict.evidence if e.signal == "gpu"]
    assert (
        "GPU 3 (rank 3) runs at 1,100 of 1,980 MHz, throttled by HW thermal slowdown" in gpu_lines
    )
    record = {g.index: g for g in verdict.gpu_health}
    assert record[3].throttled and record[3].reasons == ("hw_thermal_slowdown",)
    assert record[3].rank == 3 and record[3].sm_clock_mhz == 1100
    assert not record[0].throttled and record[0].sm_clock_max_mhz == 1980


def test_the_same_job_with_healthy_gpus_names_no_straggler() -> None:
    verdict = classify(_training(4, [[h100(r, 100 + r) for r in range(4)]]))
    assert verdict.state == "progressing", verdict.summary
    assert verdict.stragglers is not None and verdict.stragglers.suspects == ()
    assert "throttled" not in verdict.summary and verdict.suspects == ()
    assert all(not g.throttled for g in verdict.gpu_health)


def test_gpus_all_at_their_power_cap_name_no_straggler() -> None:
    """Every GPU of the job capped alike (a power-capped node): nobody is slower than the
    rest; the throttling is evidence, not a straggler."""
    gpus = [h100(r, 100 + r, sm_clock_mhz=1500, clock_event_mask=SW_POWER_CAP) for r in range(4)]
    verdict = classify(_training(4, [gpus]))
    assert verdict.stragglers is not None and verdict.stragglers.suspects == ()
    assert (
        sum(e.signal == "gpu" and "software power cap" in e.detail for e in verdict.evidence) == 4
    )


def test_a_cpu_straggler_whose_gpu_is_throttled_gets_the_cause() -> None:
    gpus = [h100(r, 100 + r) for r in range(4)]
    gpus[2] = h100(2, 102, sm_clock_mhz=1400, clock_event_mask=SW_POWER_CAP | 0x8)
    verdict = classify(_training(4, [gpus], odd=2))
    assert verdict.stragglers is not None and verdict.stragglers.basis == "samples"
    summary = verdict.stragglers.summary
    assert summary.startswith("straggler: rank 2 computes"), summary
    assert summary.endswith(
        "; rank 2's GPU 2 runs at 1,400 of 1,980 MHz, throttled by HW slowdown and its "
        "software power cap"
    ), summary


def test_a_gpu_that_fell_off_the_bus_is_a_death() -> None:
    verdict = classify(gpu_fell_off_bus())
    assert (verdict.rule, verdict.state) == ("gpu_failed", "deadlocked")
    assert verdict.summary.startswith(
        "deadlocked: rank 3's GPU 3 fell off the bus (XID 79) - rank 3 cannot go on; ranks 0"
    ), verdict.summary
    assert "a death, not a slow rank" in verdict.summary
    assert [s.rank for s in verdict.suspects] == [3]
    errors = [e.detail for e in verdict.evidence if e.signal == "gpu-error"]
    assert errors == ["GPU 3 (rank 3): XID 79: the GPU fell off the bus"]
    assert verdict.gpu_health[3].fatal == "fell off the bus (XID 79)"


def test_a_non_fatal_xid_and_uncorrected_ecc_are_evidence_not_a_death() -> None:
    gpus = [h100(r, 100 + r) for r in range(4)]
    later = [
        *gpus[:1],
        h100(1, 101, xids=(GpuXid(xid=48, t_s=1002.0),), ecc_volatile_uncorrected=2),
        *gpus[2:],
    ]
    after = [*gpus[:1], h100(1, 101, ecc_volatile_uncorrected=2), *gpus[2:]]
    verdict = classify(_training(4, [gpus, later, after]))
    assert verdict.rule != "gpu_failed" and verdict.state == "progressing", verdict.summary
    errors = [e.detail for e in verdict.evidence if e.signal == "gpu-error"]
    assert errors == [
        "GPU 1 (rank 1): XID 48: a double-bit ECC error; 2 uncorrected ECC error(s) since the "
        "driver loaded, 2 during the capture"
    ]
    assert verdict.gpu_health[1].xids == (48,) and verdict.gpu_health[1].ecc_uncorrected_new == 2


def test_bundles_without_the_fields_keep_their_json() -> None:
    """A bundle written before issue #37 (no clock reasons, no XIDs) records no GPU health."""
    old = with_gpus(gpu_ranks(2, 0), [[GpuDevice(index=0, util_gpu_pct=50.0, sm_clock_mhz=1500)]])
    assert classify(old).gpu_health == ()


def test_a_gpu_nvml_reports_lost_is_a_death_too() -> None:
    healthy = [h100(r, 100 + r) for r in range(2)]
    lost = [healthy[0], GpuDevice(index=1, error="GPU is lost")]
    verdict = classify(with_gpus(gpu_ranks(2, 1, SYNC), [healthy, lost, lost]))
    assert (verdict.rule, verdict.state) == ("gpu_failed", "deadlocked"), verdict.summary
    assert "rank 1's GPU 1 is lost (NVML: GPU is lost)" in verdict.summary


# --- end to end: a real capture of real processes, NVML served by the fake ---


def _capture(
    fake_nvml: pytest.MonkeyPatch, spawn: Any, tmp_path: Path, fields: Dict[str, Any]
) -> Path:
    job = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "4"])
    ranks = {int(k): v for k, v in json.loads(job.lines[-1].split("READY", 1)[1]).items()}
    fake_nvml.setenv("FAKE_NVML_COUNT", "4")
    fake_nvml.setenv("FAKE_NVML_PIDS", ",".join(str(ranks[r]) for r in range(4)))
    fake_nvml.setenv("FAKE_NVML_DEVICES", _devices(fields))
    fake_nvml.setenv("FAKE_NVML_REFUSE", "pcie_replays:4")
    out = tmp_path / "gpus.json"
    argv = ["capture", "--pid", str(job.pid), "--count", "3", "--interval", "0.5", "-o", str(out)]
    result = run_diag(argv)
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.slow
def test_throttle_reasons_and_xids_reach_the_json_the_report_and_the_verdict(
    fake_nvml: pytest.MonkeyPatch, spawn: Any, tmp_path: Path
) -> None:
    out = _capture(
        fake_nvml,
        spawn,
        tmp_path,
        {
            "3": {"clock_event_mask": 0x40, "sm_clock_mhz": 1100},
            "1": {"xids": [48], "xids_at": 2, "ecc_volatile_uncorrected": 2},
        },
    )
    bundle = load_bundle(out)
    # the JSON bundle: the raw NVML fields per sample, and the verdict's record per GPU
    last = bundle.samples[-1].gpu
    assert last is not None and last.devices[3].clock_event_mask == 0x40
    assert last.devices[3].sm_clock_max_mhz == 1980
    assert last.devices[0].unread == {
        "retired_pages": "Not Supported",
        "pcie_replays": "Insufficient Permissions",
    }
    xids = [x.xid for s in bundle.samples if s.gpu for x in s.gpu.devices[1].xids]
    assert xids == [48]
    raw = json.loads(out.read_text())
    assert raw["samples"][-1]["gpu"]["devices"][3]["clock_event_mask"] == 64
    verdict = bundle.verdict
    assert verdict is not None
    health = {g["index"]: g for g in raw["verdict"]["gpu_health"]}
    assert health[3]["throttled"] is True and health[3]["reasons"] == ["hw_thermal_slowdown"]
    assert health[3]["rank"] == 3 and health[3]["sm_clock_mhz"] == 1100
    assert health[1]["xids"] == [48] and health[1]["ecc_uncorrected"] == 2
    # the verdict's evidence
    details = {e.detail for e in verdict.evidence if e.signal in ("gpu", "gpu-error")}
    assert "GPU 3 (rank 3) runs at 1,100 of 1,980 MHz, throttled by HW thermal slowdown" in details
    assert (
        "GPU 1 (rank 1): XID 48: a double-bit ECC error; 2 uncorrected ECC error(s) since the "
        "driver loaded" in details
    ), details
    assert verdict.rule != "gpu_failed"
    # the report: the machine section's GPU table, HTML and Markdown
    html = out.with_suffix(".html").read_text()
    md = out.with_suffix(".md").read_text()
    assert 'id="machine-gpus"' in html and "HW thermal slowdown" in html
    assert "1,100 of 1,980 MHz" in html and "throttled</span>" in html
    assert "pcie_replays: Insufficient Permissions" in html
    assert "### Machine" in md and "GPUs (NVML):" in md
    assert "| GPU 3 **(throttled)** | rank 3 | 1,100 of 1,980 MHz | HW thermal slowdown |" in md
    assert "XID 48: a double-bit ECC error" in md


@pytest.mark.slow
def test_xid_79_from_nvml_is_a_death_in_the_verdict(
    fake_nvml: pytest.MonkeyPatch, spawn: Any, tmp_path: Path
) -> None:
    out = _capture(fake_nvml, spawn, tmp_path, {"2": {"xids": [79], "xids_at": 2}})
    verdict = json.loads(out.read_text())["verdict"]
    assert (verdict["rule"], verdict["state"]) == ("gpu_failed", "deadlocked"), verdict["summary"]
    assert verdict["summary"].startswith("deadlocked: rank 2's GPU 2 fell off the bus (XID 79)")
    assert [s.get("rank") for s in verdict["suspects"]][:1] == [2]
    md = out.with_suffix(".md").read_text()
    assert "| GPU 2 **(failed)** | rank 2 |" in md


# --- bench/gpu_check.sh: what a lent GPU machine runs; here it must say "no NVML" cleanly ---

GPU_CHECK = REPO / "bench" / "gpu_check.sh"


def _gpu_check(tmp_path: Path, env: Dict[str, str]) -> Any:
    return subprocess.run(
        ["bash", str(GPU_CHECK), str(tmp_path / "out")],
        cwd=REPO,
        env={**os.environ, "PYTHON": sys.executable, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_gpu_check_says_no_nvml_here(tmp_path: Path) -> None:
    done = _gpu_check(tmp_path, {})
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.startswith("gpu_check: no NVML here (NVML unavailable: "), done.stdout
    assert done.stderr == ""


@pytest.mark.slow
def test_gpu_check_reads_the_fields_through_the_probe_and_a_capture(
    fake_nvml: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The whole script under the fake NVML (and a fake ``nvidia-smi -L``): the probe's read,
    a capture of a plain sleep, the records checked, the verdict's GPU health printed."""
    env = {
        "PATH": f"{FAKE_NVML / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "FAKE_NVML_COUNT": "2",
        "FAKE_NVML_DEVICES": _devices({"1": {"clock_event_mask": 0x40, "sm_clock_mhz": 1100}}),
        "FAKE_NVML_REFUSE": "ecc:3",
        "PYTHONPATH": os.environ["PYTHONPATH"],
        "LD_LIBRARY_PATH": os.environ["LD_LIBRARY_PATH"],
    }
    done = _gpu_check(tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "gpu_check: NVML through diag's probe: driver 550.54.15, 2 GPU(s)" in out
    assert "SM clock 1100 of 1980 MHz; clock-event reasons 0x40: hw_thermal_slowdown" in out
    assert "not read: ecc: Not Supported" in out
    assert "reasons ['hw_thermal_slowdown'], throttled True" in out
    assert out.rstrip().endswith("gpu_check: OK - NVML records filled and mapped to ranks")
