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
import re
from pathlib import Path
from types import ModuleType
from typing import Any, Dict

import pytest
from conftest import FAKE_NVML, REPO

from diag.model import CLOCK_EVENT_BITS, clock_event_names
from diag.probes.gpu import nvml_worker
from diag.probes.gpu.probe import GpuProbe, read_gpu


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
