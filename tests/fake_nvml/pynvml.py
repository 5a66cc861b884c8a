"""A fake ``pynvml`` (nvidia-ml-py) for machines without a GPU.

It implements exactly the calls diag's NVML worker makes, with the same names, return shapes
(objects with ``.gpu``/``.memory``, ``.used``/``.total``, ``.pid``/``.usedGpuMemory``), units
(milliwatts, bytes) and error classes (``NVMLError`` whose ``str`` is NVML's message). Put this
directory first on PYTHONPATH of the process that starts the worker and the worker imports it
instead of the real binding, and ``tests/fake_nvml/lib`` on LD_LIBRARY_PATH: its placeholder
``libnvidia-ml.so.1`` (not a library, never loaded) is the driver trace diag looks for before
it starts the worker at all (``diag.probes.gpu.nvidia_host``).

Scenario, from the environment:
    FAKE_NVML_SCENARIO  gpus (default) | no_driver | no_library | hang | stuck | busy | idle |
                        hidden_pids | lost
    FAKE_NVML_COUNT     number of devices (default 8)
    FAKE_NVML_PIDS      comma-separated PIDs; PID i runs on device i
    FAKE_NVML_UTIL_PCT, FAKE_NVML_POWER_W   override the scenario's utilisation / power draw
    FAKE_NVML_HANG_FILE when set, touched right before a hang so a test knows NVML was reached
    FAKE_NVML_HANG_AFTER N: a worker answers N requests, then hangs in the next one (a driver
                        that wedges mid-watch); counted per process
    FAKE_NVML_LOG_FILE  when set, each request appends the serving process's PID (one line),
                        so a test can tell which process answered which sample
    FAKE_NVML_DEVICES   JSON, per device index (a string) the fields of issue #37 to serve:
                        clock_event_mask (an NVML reason mask), sm_clock_mhz, sm_clock_max_mhz,
                        power_w, util_pct, xids (a list, delivered once through the XID event
                        set, from request ``xids_at``, default 1), ecc_volatile_corrected,
                        ecc_volatile_uncorrected, ecc_aggregate_corrected,
                        ecc_aggregate_uncorrected, retired_pages_sbe, retired_pages_dbe (the
                        board retires pages, pre-Ampere; else Not Supported),
                        retired_pages_pending, remapped_rows ([correctable, uncorrectable,
                        pending, failed]), pcie_replays
    FAKE_NVML_REFUSE    comma-separated FIELD:CODE - every device answers that field with that
                        NVML error (3 Not Supported, 4 Insufficient Permissions); fields:
                        clock_events, sm_clock_max, ecc, retired_pages, remapped_rows,
                        pcie_replays, events
    FAKE_NVML_OLD_DRIVER 1: nvmlDeviceGetCurrentClocksEventReasons is Function Not Found (a
                        driver before 12.535), the throttle-reasons call answers instead

Names, constants and return shapes are the real binding's (``nvidia-ml-py``'s pynvml.py;
tests/test_gpu_health.py checks every name this module defines against it).
"""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace
from typing import Any, Dict, List

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
nvmlEventTypeXidCriticalError = 0x0000000000000008
nvmlClocksEventReasonGpuIdle = 0x0000000000000001
nvmlClocksEventReasonSwPowerCap = 0x0000000000000004
nvmlClocksEventReasonHwSlowdown = 0x0000000000000008
nvmlClocksEventReasonSyncBoost = 0x0000000000000010
nvmlClocksEventReasonSwThermalSlowdown = 0x0000000000000020
nvmlClocksEventReasonHwThermalSlowdown = 0x0000000000000040
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x0000000000000080
SM_CLOCK_MAX_MHZ = 1980  # an H100 SXM's boost ceiling

_MESSAGES = {
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
}

# Per-scenario (util %, power W); power limit is 700 W (an H100 SXM).
_PRESETS = {
    "gpus": (35.0, 310.0),
    "busy": (98.0, 640.0),
    "stuck": (100.0, 92.0),  # a NCCL kernel spinning on a peer: 100% "util", near idle power
    "idle": (0.0, 71.0),
    "hidden_pids": (97.0, 610.0),
    "lost": (40.0, 300.0),
}
POWER_LIMIT_W = 700.0
MEM_TOTAL_BYTES = 80 * 1024**3


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML Error with code {self.value}")


class NVMLError_DriverNotLoaded(NVMLError):  # the real binding names these classes so
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_DRIVER_NOT_LOADED)


class NVMLError_LibraryNotFound(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_LIBRARY_NOT_FOUND)


class NVMLError_GpuIsLost(NVMLError):
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_GPU_IS_LOST)


def _scenario() -> str:
    return os.environ.get("FAKE_NVML_SCENARIO", "gpus")


def _count() -> int:
    return int(os.environ.get("FAKE_NVML_COUNT", "8"))


def _pids() -> List[int]:
    raw = os.environ.get("FAKE_NVML_PIDS", "")
    return [int(p) for p in raw.split(",") if p.strip()]


def _levels() -> Dict[str, float]:
    util, power = _PRESETS.get(_scenario(), _PRESETS["gpus"])
    return {
        "util": float(os.environ.get("FAKE_NVML_UTIL_PCT", util)),
        "power": float(os.environ.get("FAKE_NVML_POWER_W", power)),
    }


def nvmlInit() -> None:
    scenario = _scenario()
    if scenario == "no_driver":
        raise NVMLError_DriverNotLoaded()
    if scenario == "no_library":
        raise NVMLError_LibraryNotFound()
    if scenario == "hang":
        _hang()  # a wedged driver: nvmlInit never returns


def _hang() -> None:
    marker = os.environ.get("FAKE_NVML_HANG_FILE")
    if marker:
        with open(marker, "w") as fh:
            fh.write(str(os.getpid()))
    while True:
        time.sleep(3600)


def nvmlShutdown() -> None:
    pass


def nvmlSystemGetDriverVersion() -> str:
    return "550.54.15"


_requests = [0]  # device counts asked by this process: one per request of diag's worker


def nvmlDeviceGetCount() -> int:
    _requests[0] += 1
    log = os.environ.get("FAKE_NVML_LOG_FILE")
    if log:
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()}\n")
    hang_after = os.environ.get("FAKE_NVML_HANG_AFTER")
    if hang_after is not None and _requests[0] > int(hang_after):
        _hang()
    return _count()


def nvmlDeviceGetHandleByIndex(index: int) -> Any:
    if not 0 <= index < _count():
        raise NVMLError(2)
    if _scenario() == "lost" and index == 3:
        raise NVMLError_GpuIsLost()
    return SimpleNamespace(index=index)


def nvmlDeviceGetUUID(handle: Any) -> str:
    return f"GPU-fake0000-0000-0000-0000-{handle.index:012d}"


def nvmlDeviceGetName(handle: Any) -> str:
    return "NVIDIA H100 80GB HBM3"


def nvmlDeviceGetPciInfo(handle: Any) -> Any:
    return SimpleNamespace(busId=f"00000000:{0x18 + 0x10 * handle.index:02X}:00.0")


def _util(handle: Any) -> float:
    return float(_set(handle).get("util_pct", _levels()["util"]))


def nvmlDeviceGetUtilizationRates(handle: Any) -> Any:
    util = _util(handle)
    return SimpleNamespace(gpu=int(util), memory=int(util * 0.4))


def nvmlDeviceGetMemoryInfo(handle: Any) -> Any:
    used = 71 * 1024**3 if _pids() or _scenario() == "hidden_pids" else 512 * 1024**2
    return SimpleNamespace(used=used, total=MEM_TOTAL_BYTES, free=MEM_TOTAL_BYTES - used)


def nvmlDeviceGetPowerUsage(handle: Any) -> int:
    power = _set(handle).get("power_w", _levels()["power"])
    return int(float(power) * 1000)  # milliwatts, like NVML


def nvmlDeviceGetEnforcedPowerLimit(handle: Any) -> int:
    return int(POWER_LIMIT_W * 1000)


def nvmlDeviceGetClockInfo(handle: Any, clock: int) -> int:
    default = SM_CLOCK_MAX_MHZ if _util(handle) > 0 else 345
    return int(_set(handle).get("sm_clock_mhz", default))


def nvmlDeviceGetTemperature(handle: Any, sensor: int) -> int:
    return 41 + int(_levels()["power"] / 20)


def nvmlDeviceGetComputeRunningProcesses(handle: Any) -> List[Any]:
    pids = _pids()
    if _scenario() == "hidden_pids":
        # In a container NVML answers with host PIDs that mean nothing in our PID namespace.
        return [SimpleNamespace(pid=900000 + handle.index, usedGpuMemory=70 * 1024**3)]
    if handle.index < len(pids):
        return [SimpleNamespace(pid=pids[handle.index], usedGpuMemory=70 * 1024**3)]
    return []


# Issue #37: clock-event reasons, XIDs, ECC, retired pages / remapped rows, PCIe replays.


def _set(handle: Any) -> Dict[str, Any]:
    """The fields FAKE_NVML_DEVICES sets for this device ({} when none)."""
    raw = os.environ.get("FAKE_NVML_DEVICES", "")
    devices = json.loads(raw) if raw else {}
    return dict(devices.get(str(handle.index), {}))


def _refused(field: str) -> None:
    for item in os.environ.get("FAKE_NVML_REFUSE", "").split(","):
        name, _, code = item.partition(":")
        if name.strip() == field:
            raise NVMLError(int(code or NVML_ERROR_NOT_SUPPORTED))


def _clock_mask(handle: Any) -> int:
    _refused("clock_events")
    idle = nvmlClocksEventReasonGpuIdle if _util(handle) == 0 else 0
    return int(_set(handle).get("clock_event_mask", idle))


def nvmlDeviceGetCurrentClocksEventReasons(handle: Any) -> int:
    if os.environ.get("FAKE_NVML_OLD_DRIVER") == "1":
        raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
    return _clock_mask(handle)


def nvmlDeviceGetCurrentClocksThrottleReasons(handle: Any) -> int:
    return _clock_mask(handle)


def nvmlDeviceGetMaxClockInfo(handle: Any, clock: int) -> int:
    _refused("sm_clock_max")
    return int(_set(handle).get("sm_clock_max_mhz", SM_CLOCK_MAX_MHZ))


def nvmlDeviceGetTotalEccErrors(handle: Any, errorType: int, counterType: int) -> int:
    _refused("ecc")
    kind = "corrected" if errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED else "uncorrected"
    counter = "volatile" if counterType == NVML_VOLATILE_ECC else "aggregate"
    return int(_set(handle).get(f"ecc_{counter}_{kind}", 0))


def nvmlDeviceGetRetiredPages(device: Any, sourceFilter: int) -> List[int]:
    _refused("retired_pages")
    fields = _set(device)
    if "retired_pages_sbe" not in fields and "retired_pages_dbe" not in fields:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)  # Ampere on: rows are remapped instead
    double = sourceFilter == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
    count = int(fields.get("retired_pages_dbe" if double else "retired_pages_sbe", 0))
    return [0x1000 * (i + 1) for i in range(count)]


def nvmlDeviceGetRetiredPagesPendingStatus(device: Any) -> int:
    _refused("retired_pages")
    return int(bool(_set(device).get("retired_pages_pending", False)))


def nvmlDeviceGetRemappedRows(device: Any) -> Any:
    _refused("remapped_rows")
    corr, unc, pending, failed = _set(device).get("remapped_rows", [0, 0, 0, 0])
    return (int(corr), int(unc), int(pending), int(failed))


def nvmlDeviceGetPcieReplayCounter(handle: Any) -> int:
    _refused("pcie_replays")
    return int(_set(handle).get("pcie_replays", 0))


class _EventSet:
    def __init__(self) -> None:
        self.devices: List[Any] = []
        self.delivered: Dict[int, int] = {}  # device index -> XIDs already handed out


def nvmlEventSetCreate() -> Any:
    _refused("events")
    return _EventSet()


def nvmlDeviceRegisterEvents(handle: Any, eventTypes: int, eventSet: Any) -> None:
    _refused("events")
    eventSet.devices.append(handle)


def nvmlEventSetWait_v2(eventSet: Any, timeoutms: int) -> Any:
    """The next XID of a registered device, or NVML's Timeout when none is due (as the real
    call after ``timeoutms``; a fake never blocks)."""
    for handle in eventSet.devices:
        fields = _set(handle)
        xids = list(fields.get("xids", ()))
        done = eventSet.delivered.get(handle.index, 0)
        if done < len(xids) and _requests[0] >= int(fields.get("xids_at", 1)):
            eventSet.delivered[handle.index] = done + 1
            return SimpleNamespace(
                device=handle,
                eventType=nvmlEventTypeXidCriticalError,
                eventData=int(xids[done]),
                gpuInstanceId=0xFFFFFFFF,
                computeInstanceId=0xFFFFFFFF,
            )
    raise NVMLError(NVML_ERROR_TIMEOUT)


def nvmlEventSetFree(eventSet: Any) -> None:
    eventSet.devices.clear()
