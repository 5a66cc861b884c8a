"""The subprocess side of the GPU probe: a long-lived NVML reader, one JSON line per request.

It runs in its own process because NVML can hang forever on a wedged driver (and a thread stuck
in the driver cannot be cancelled): the parent kills this process at its deadline and records a
probe failure instead of hanging the whole capture. It lives as long as the capture or watch
that started it (``diag.probes.gpu.nvml_client``), so the interpreter start, the ``pynvml`` import
and ``nvmlInit`` - slow on a GPU without persistence mode - are paid once, not every sample.

Protocol: each line on stdin is one request; the answer is one line on stdout matching
``diag.model.GpuSample``. End of stdin (diag closed the pipe, exited or was killed) ends the
worker after ``nvmlShutdown``, so a worker never outlives diag unless it is stuck in the
driver. ``--once`` answers once without reading stdin (for a person checking a host by hand).

``{"available": false, "reason": ...}`` when there is no binding, no library or no driver is a
normal answer, not an error; a failed ``nvmlInit`` is retried on the next request. Fields a GPU
does not support (power on some boards, processes without permission) stay null.

It imports ``pynvml`` (from the ``nvidia-ml-py`` package) the ordinary way, so a module earlier
on PYTHONPATH - the fake NVML of the tests - replaces it without any hook in this code. Only
the standard library is imported besides: the worker starts fast under any Python.
"""

from __future__ import annotations

import io
import json
import sys
import time
from functools import partial
from typing import IO, Any, Callable, Dict, List, Optional, Sequence

MIB = 1024 * 1024


def _text(value: Any) -> str:
    """Old bindings return bytes, new ones str."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _try(nvml: Any, fn: Callable[[], Any]) -> Any:
    """One NVML field: None when the device does not support it or denies it."""
    try:
        return fn()
    except nvml.NVMLError:
        return None


def _processes(nvml: Any, handle: Any) -> List[Dict[str, Any]]:
    procs = _try(nvml, lambda: nvml.nvmlDeviceGetComputeRunningProcesses(handle)) or []
    out: List[Dict[str, Any]] = []
    for proc in procs:
        used = getattr(proc, "usedGpuMemory", None)
        entry: Dict[str, Any] = {"pid": int(proc.pid)}
        # NVML reports NVML_VALUE_NOT_AVAILABLE (2**64-1) when it cannot account the memory.
        if isinstance(used, int) and 0 <= used < 2**63:
            entry["used_memory_bytes"] = used
        out.append(entry)
    return out


def _device(nvml: Any, index: int, xids: Optional[XidWatch] = None) -> Dict[str, Any]:
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
    except nvml.NVMLError as exc:
        return {"index": index, "error": _text(exc)}
    dev: Dict[str, Any] = {"index": index}
    uuid = _try(nvml, lambda: nvml.nvmlDeviceGetUUID(handle))
    name = _try(nvml, lambda: nvml.nvmlDeviceGetName(handle))
    pci = _try(nvml, lambda: nvml.nvmlDeviceGetPciInfo(handle))
    dev["uuid"] = _text(uuid) if uuid is not None else ""
    dev["name"] = _text(name) if name is not None else ""
    if pci is not None:
        dev["pci_bus_id"] = _text(getattr(pci, "busId", ""))
    util = _try(nvml, lambda: nvml.nvmlDeviceGetUtilizationRates(handle))
    if util is not None:
        dev["util_gpu_pct"] = float(util.gpu)
        dev["util_mem_pct"] = float(util.memory)
    mem = _try(nvml, lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
    if mem is not None:
        dev["mem_used_bytes"] = int(mem.used)
        dev["mem_total_bytes"] = int(mem.total)
    power_mw = _try(nvml, lambda: nvml.nvmlDeviceGetPowerUsage(handle))
    if power_mw is not None:
        dev["power_w"] = round(power_mw / 1000.0, 1)
    limit_mw = _try(nvml, lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(handle))
    if limit_mw is not None:
        dev["power_limit_w"] = round(limit_mw / 1000.0, 1)
    sm = _try(nvml, lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
    if sm is not None:
        dev["sm_clock_mhz"] = int(sm)
    temp = _try(nvml, lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
    if temp is not None:
        dev["temperature_c"] = float(temp)
    dev["processes"] = _processes(nvml, handle)
    _health(nvml, handle, dev)
    if xids is not None:
        xids.read(index, handle, dev)
    return dev


# Issue #37: why the clocks are low, and the faults. Each field fails alone: a refusal
# (Not Supported on a board without ECC, Insufficient Permissions in a container) is kept by
# name in ``unread`` and the next field is read. The worker's deadline bounds every call
# (NVML calls cannot be interrupted in-process); the counts are bounded here.
MAX_XIDS_PER_READ = 16  # per device and request; the rest stay queued for the next read
_FUNCTION_NOT_FOUND = 13  # NVML_ERROR_FUNCTION_NOT_FOUND: an older driver lacks the call
_TIMEOUT = 10  # NVML_ERROR_TIMEOUT: the event set holds nothing (a poll with 0 ms)
_CLOCK_EVENT_CALLS = (
    "nvmlDeviceGetCurrentClocksEventReasons",  # NVML 12.535 on
    "nvmlDeviceGetCurrentClocksThrottleReasons",  # older drivers (deprecated name)
)


def _field(nvml: Any, dev: Dict[str, Any], name: str, fn: Callable[[], Any]) -> Any:
    """One field, or None with NVML's refusal kept in ``dev["unread"][name]``."""
    try:
        return fn()
    except nvml.NVMLError as exc:
        dev.setdefault("unread", {})[name] = _text(exc)[:80]
        return None


def _clock_events(nvml: Any, handle: Any, dev: Dict[str, Any]) -> None:
    for call in _CLOCK_EVENT_CALLS:
        fn = getattr(nvml, call, None)
        if fn is None:  # a binding that predates the name
            continue
        try:
            dev["clock_event_mask"] = int(fn(handle))
            return
        except nvml.NVMLError as exc:
            if getattr(exc, "value", None) == _FUNCTION_NOT_FOUND:
                continue
            dev.setdefault("unread", {})["clock_events"] = _text(exc)[:80]
            return
    dev.setdefault("unread", {})["clock_events"] = "no clock-event call in this NVML"


def _ecc(nvml: Any, handle: Any, dev: Dict[str, Any]) -> None:
    corrected = nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
    uncorrected = nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    for key, kind, counter in (
        ("ecc_volatile_uncorrected", uncorrected, nvml.NVML_VOLATILE_ECC),
        ("ecc_volatile_corrected", corrected, nvml.NVML_VOLATILE_ECC),
        ("ecc_aggregate_uncorrected", uncorrected, nvml.NVML_AGGREGATE_ECC),
        ("ecc_aggregate_corrected", corrected, nvml.NVML_AGGREGATE_ECC),
    ):
        value = _field(
            nvml, dev, "ecc", partial(nvml.nvmlDeviceGetTotalEccErrors, handle, kind, counter)
        )
        if value is None:
            return  # ECC off or unsupported: the other counters answer the same
        dev[key] = int(value)


def _pages(nvml: Any, handle: Any, dev: Dict[str, Any]) -> None:
    """Retired pages (before Ampere) and remapped rows (Ampere on): each board has one."""
    for key, cause in (
        ("retired_pages_dbe", nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
        ("retired_pages_sbe", nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
    ):
        pages = _field(
            nvml, dev, "retired_pages", partial(nvml.nvmlDeviceGetRetiredPages, handle, cause)
        )
        if pages is None:
            break
        dev[key] = len(pages)
    else:
        pending = _field(
            nvml,
            dev,
            "retired_pages",
            lambda: nvml.nvmlDeviceGetRetiredPagesPendingStatus(handle),
        )
        if pending is not None:
            dev["retired_pages_pending"] = bool(pending)
    rows = _field(nvml, dev, "remapped_rows", lambda: nvml.nvmlDeviceGetRemappedRows(handle))
    if rows is not None:
        corr, unc, pending, failed = rows
        dev["remapped_rows_correctable"] = int(corr)
        dev["remapped_rows_uncorrectable"] = int(unc)
        dev["remap_pending"] = bool(pending)
        dev["remap_failed"] = bool(failed)


def _health(nvml: Any, handle: Any, dev: Dict[str, Any]) -> None:
    _clock_events(nvml, handle, dev)
    top = _field(
        nvml,
        dev,
        "sm_clock_max",
        lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM),
    )
    if top is not None:
        dev["sm_clock_max_mhz"] = int(top)
    _ecc(nvml, handle, dev)
    _pages(nvml, handle, dev)
    replays = _field(nvml, dev, "pcie_replays", lambda: nvml.nvmlDeviceGetPcieReplayCounter(handle))
    if replays is not None:
        dev["pcie_replays"] = int(replays)


class XidWatch:
    """Per device, an NVML event set registered for XID critical errors, kept for the
    session and drained without blocking (a 0 ms wait) at each request: the XIDs that arrived
    since the previous read. NVML delivers only events after registration, so the first read
    of a capture sees none from before it (the NVRM lines of the kernel log tell those)."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.sets: Dict[int, Any] = {}
        self.refused: Dict[int, str] = {}

    def _set(self, index: int, handle: Any) -> Any:
        nvml = self.nvml
        if index in self.sets or index in self.refused:
            return self.sets.get(index)
        try:
            event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as exc:
            self.refused[index] = _text(exc)[:80]
            return None
        try:
            nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, event_set)
        except nvml.NVMLError as exc:
            self.refused[index] = _text(exc)[:80]
            _free(nvml, event_set)
            return None
        self.sets[index] = event_set
        return event_set

    def read(self, index: int, handle: Any, dev: Dict[str, Any]) -> None:
        nvml = self.nvml
        event_set = self._set(index, handle)
        if event_set is None:
            dev.setdefault("unread", {})["xids"] = self.refused.get(index, "")
            return
        xids: List[Dict[str, Any]] = []
        for _ in range(MAX_XIDS_PER_READ):
            try:
                data = nvml.nvmlEventSetWait_v2(event_set, 0)
            except nvml.NVMLError as exc:
                if getattr(exc, "value", None) != _TIMEOUT:
                    dev.setdefault("unread", {})["xids"] = _text(exc)[:80]
                break
            xids.append({"xid": int(data.eventData), "t_s": round(time.time(), 3)})
        if xids:
            dev["xids"] = xids

    def close(self) -> None:
        for event_set in self.sets.values():
            _free(self.nvml, event_set)
        self.sets.clear()
        self.refused.clear()


def _free(nvml: Any, event_set: Any) -> None:
    try:
        nvml.nvmlEventSetFree(event_set)
    except Exception:
        pass


class NvmlSession:
    """NVML initialised once and kept: ``read`` is one request's answer (real or fake binding).

    A failed ``nvmlInit`` is not remembered (a driver may finish loading), and a failed device
    count drops the session so the next request initialises again."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.initialised = False
        self.xids = XidWatch(nvml)

    def read(self) -> Dict[str, Any]:
        nvml = self.nvml
        if not self.initialised:
            try:
                nvml.nvmlInit()
            except nvml.NVMLError as exc:
                return {"available": False, "reason": f"NVML unavailable: {_text(exc)}"}
            self.initialised = True
        driver: Optional[str] = None
        raw_driver = _try(nvml, nvml.nvmlSystemGetDriverVersion)
        if raw_driver is not None:
            driver = _text(raw_driver)
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as exc:
            self.shutdown()
            return {"available": False, "reason": f"NVML device count failed: {_text(exc)}"}
        if count == 0:
            return {"available": False, "reason": "no NVIDIA GPU on this host"}
        result: Dict[str, Any] = {
            "available": True,
            "devices": [_device(nvml, i, self.xids) for i in range(count)],
        }
        if driver:
            result["driver_version"] = driver
        return result

    def shutdown(self) -> None:
        if not self.initialised:
            return
        self.initialised = False
        self.xids.close()
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass


def _no_binding() -> Dict[str, Any]:
    return {
        "available": False,
        "reason": "nvidia-ml-py is not installed (pip install nvidia-ml-py)",
    }


def serve(answer: Callable[[], Dict[str, Any]], requests: IO[str], replies: IO[str]) -> int:
    """Answer every request line until end of input; returns the number answered."""
    served = 0
    for _line in requests:
        replies.write(json.dumps(answer(), separators=(",", ":")) + "\n")
        replies.flush()
        served += 1
    return served


def main(argv: Sequence[str] = ()) -> int:
    try:
        import pynvml
    except ImportError:
        session: Optional[NvmlSession] = None
    else:
        session = NvmlSession(pynvml)
    answer = session.read if session is not None else _no_binding
    try:
        if "--once" in argv:
            serve(answer, io.StringIO("read\n"), sys.stdout)
        else:
            serve(answer, sys.stdin, sys.stdout)
    except (BrokenPipeError, KeyboardInterrupt):
        pass  # diag went away mid-answer: nothing left to tell anyone
    finally:
        if session is not None:
            session.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
