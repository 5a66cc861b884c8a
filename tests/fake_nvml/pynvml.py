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
"""

from __future__ import annotations

import os
import time
from types import SimpleNamespace
from typing import Any, Dict, List

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15

_MESSAGES = {
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
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


def nvmlDeviceGetUtilizationRates(handle: Any) -> Any:
    util = _levels()["util"]
    return SimpleNamespace(gpu=int(util), memory=int(util * 0.4))


def nvmlDeviceGetMemoryInfo(handle: Any) -> Any:
    used = 71 * 1024**3 if _pids() or _scenario() == "hidden_pids" else 512 * 1024**2
    return SimpleNamespace(used=used, total=MEM_TOTAL_BYTES, free=MEM_TOTAL_BYTES - used)


def nvmlDeviceGetPowerUsage(handle: Any) -> int:
    return int(_levels()["power"] * 1000)  # milliwatts, like NVML


def nvmlDeviceGetEnforcedPowerLimit(handle: Any) -> int:
    return int(POWER_LIMIT_W * 1000)


def nvmlDeviceGetClockInfo(handle: Any, clock: int) -> int:
    return 1980 if _levels()["util"] > 0 else 345


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
