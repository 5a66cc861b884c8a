"""GPU probe: NVML read by a long-lived, killable worker process, and GPUs mapped to ranks.

NVML (and nvidia-smi) can hang forever on a wedged driver, and a thread blocked in the driver
cannot be cancelled, so NVML is read in ``diag.probes.gpu.nvml_worker``, a child process asked once
per sample with a hard deadline (``diag.probes.gpu.nvml_client``). It is started on the first sample
(from the probe's own thread, so its start overlaps the sample's other probes) and serves every
later one: the interpreter, the binding's import and ``nvmlInit`` are paid once per capture or
watch, not per sample. On a deadline the worker is killed, the probe raises ``ProbeError``
(recorded as a ``ProbeFailure``, the rest of the sample is kept) and the next sample starts a
fresh worker - unless the killed one never exited (stuck in the driver), see ``GpuProbe``.

A host with no trace of an NVIDIA driver (``diag.probes.gpu.nvidia_host``) gets its answer without
any subprocess. No binding, no library, no driver or no GPU is a normal
``GpuSample(available=False, reason=...)``.

Ranks are matched to GPUs by PID first (NVML's running-process lists, walking up the process
tree because the CUDA context may live in a child of the rank). In a container NVML reports
host PIDs that do not exist in our PID namespace; then the rank's CUDA_VISIBLE_DEVICES and
LOCAL_RANK decide (CUDA numbers devices like NVML when CUDA_DEVICE_ORDER=PCI_BUS_ID, the
usual setting on homogeneous GPU nodes).
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Callable, List, Mapping, Optional, Protocol

import msgspec

from diag.model import GpuSample
from diag.probes.gpu.nvidia_host import NO_DRIVER_REASON, nvidia_signs
from diag.probes.gpu.nvml_client import NvmlWorker, WorkerTimeout
from diag.probes.runner import ProbeCall, ProbeError

DEFAULT_TIMEOUT_S = 8.0
# Answers that cannot change while diag runs: no need to ask again.
_PERMANENT = ("not installed", "Shared Library Not Found", NO_DRIVER_REASON)


def parse_worker_output(text: str) -> GpuSample:
    """The worker's one JSON line → GpuSample (pure; raises ProbeError on garbage)."""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    try:
        return msgspec.json.decode(line.encode(), type=GpuSample)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProbeError(f"NVML worker printed no valid record: {exc}: {line[:200]!r}") from exc


class _Pollable(Protocol):
    """What is kept of a killed worker: whether it has exited yet."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> Optional[int]: ...


class NvmlHung(ProbeError):
    """NVML did not answer in time; ``worker`` is the killed child (it may be unkillable)."""

    def __init__(self, message: str, worker: _Pollable) -> None:
        super().__init__(message)
        self.worker = worker


def _hung_message(timeout_s: float) -> str:
    return f"NVML did not answer within {timeout_s:g}s (wedged GPU driver?); worker killed"


def read_gpu(
    timeout_s: float = DEFAULT_TIMEOUT_S,
    python: str = sys.executable,
    env: Optional[Mapping[str, str]] = None,
) -> GpuSample:
    """Start a worker, ask it once, close it (no driver pre-check): one answer by hand."""
    worker = NvmlWorker(python, env)
    try:
        line = worker.request(timeout_s)
    except WorkerTimeout:
        worker.kill()
        raise NvmlHung(_hung_message(timeout_s), worker) from None
    except BaseException:
        worker.kill()
        raise
    worker.close()
    return parse_worker_output(line)


def _close_slot(slot: List[Optional[NvmlWorker]]) -> None:
    """Close the worker held in ``slot``; run by ``close`` or, as a safety net, at exit/GC."""
    worker, slot[0] = slot[0], None
    if worker is not None:
        worker.close()


class GpuProbe:
    """Per-capture GPU probe owning one worker at a time.

    Remembers the answers that cannot change (no driver trace, no library, no binding), and a
    worker stuck in the driver: a process in D state survives SIGKILL, so while it lives no new
    worker is started - a day-long watch must not pile up one per sample. ``close`` ends the
    worker; a ``weakref.finalize`` does it too at interpreter exit or when the probe is
    collected, and the worker exits by itself when diag dies (end of its stdin).
    """

    def __init__(
        self,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        driver_signs: Callable[[], List[str]] = nvidia_signs,
        python: str = sys.executable,
        env: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.timeout_s = timeout_s
        self._driver_signs = driver_signs
        self._python = python
        self._env = env
        self._permanent: Optional[GpuSample] = None
        self._hung: Optional[_Pollable] = None
        self._checked = False
        self._closed = False
        self._lock = threading.Lock()
        self._slot: List[Optional[NvmlWorker]] = [None]  # shared with the finalizer
        self._finalizer = weakref.finalize(self, _close_slot, self._slot)

    @property
    def worker_pid(self) -> Optional[int]:
        """PID of the running worker (None before the first request and after close)."""
        worker = self._slot[0]
        return worker.pid if worker is not None else None

    def read(self) -> GpuSample:
        if self._permanent is not None:
            return self._permanent
        if not self._lock.acquire(blocking=False):
            raise ProbeError("the previous NVML read has not finished")
        try:
            return self._read()
        finally:
            self._lock.release()

    def _read(self) -> GpuSample:
        if self._closed:
            raise ProbeError("GPU probe already closed")
        if self._hung is not None:
            if self._hung.poll() is None:
                raise ProbeError(
                    f"NVML still hung: worker PID {self._hung.pid} from an earlier sample has "
                    "not exited (wedged GPU driver); not starting another"
                )
            self._hung = None
        if not self._checked:
            self._checked = True
            if not self._driver_signs():
                self._permanent = GpuSample(available=False, reason=NO_DRIVER_REASON)
                return self._permanent
        worker = self._slot[0]
        if worker is not None and worker.poll() is not None:
            _close_slot(self._slot)  # died between samples (OOM killer, a person): not NVML's
            worker = None  # fault, so not this sample's failure: just start another
        if worker is None:
            worker = self._slot[0] = NvmlWorker(self._python, self._env)
            if self._closed:  # closed while it started (Ctrl-C): it must not outlive diag
                _close_slot(self._slot)
                raise ProbeError("GPU probe closed")
        try:
            sample = parse_worker_output(worker.request(self.timeout_s))
        except WorkerTimeout:
            self._slot[0] = None
            if not worker.kill():
                self._hung = worker
            raise NvmlHung(_hung_message(self.timeout_s), worker) from None
        except ProbeError:  # exited instead of answering, or garbage: start afresh next time
            _close_slot(self._slot)
            raise
        if not sample.available and any(p in (sample.reason or "") for p in _PERMANENT):
            self._permanent = sample
            _close_slot(self._slot)
        return sample

    def close(self) -> None:
        """End the worker (capture end, watch end, Ctrl-C); later reads raise ProbeError."""
        self._closed = True
        self._finalizer()

    def call(self) -> ProbeCall[GpuSample]:
        """A runner call whose own deadline is a little later than the worker's kill."""
        return ProbeCall("gpu", self.read, timeout_s=self.timeout_s + 2.0)
