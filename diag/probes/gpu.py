"""GPU probe: NVML read in a killable subprocess, and the mapping of GPUs to ranks.

NVML (and nvidia-smi) can hang forever on a wedged driver, and a thread blocked in the driver
cannot be cancelled, so the read happens in ``diag.probes.nvml_worker`` run as a child process
with a hard deadline: on expiry the child is killed and the probe raises ``ProbeError``, which
the runner records as a ``ProbeFailure`` while the rest of the sample is kept. No binding, no
library, no driver or no GPU is a normal ``GpuSample(available=False, reason=...)``.

Ranks are matched to GPUs by PID first (NVML's running-process lists, walking up the process
tree because the CUDA context may live in a child of the rank). In a container NVML reports
host PIDs that do not exist in our PID namespace; then the rank's CUDA_VISIBLE_DEVICES and
LOCAL_RANK decide (CUDA numbers devices like NVML when CUDA_DEVICE_ORDER=PCI_BUS_ID, the
usual setting on homogeneous GPU nodes).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import msgspec

from diag.model import GpuDevice, GpuSample, ProcessInfo
from diag.probes.runner import ProbeCall, ProbeError

DEFAULT_TIMEOUT_S = 8.0
_WORKER_MODULE = "diag.probes.nvml_worker"
# Answers that cannot change while diag runs: no need to start the worker again.
_PERMANENT = ("not installed", "Shared Library Not Found")


def parse_worker_output(text: str) -> GpuSample:
    """The worker's one JSON line → GpuSample (pure; raises ProbeError on garbage)."""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    try:
        return msgspec.json.decode(line.encode(), type=GpuSample)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProbeError(f"NVML worker printed no valid record: {exc}: {line[:200]!r}") from exc


class NvmlHung(ProbeError):
    """NVML did not answer in time; ``worker`` is the killed child (it may be unkillable)."""

    def __init__(self, message: str, worker: subprocess.Popen[str]) -> None:
        super().__init__(message)
        self.worker = worker


def read_gpu(
    timeout_s: float = DEFAULT_TIMEOUT_S,
    python: str = sys.executable,
    env: Optional[Mapping[str, str]] = None,
) -> GpuSample:
    """Run the NVML worker once; kill it at ``timeout_s`` (a hung driver) and raise."""
    proc = subprocess.Popen(
        [python, "-m", _WORKER_MODULE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:  # a child stuck in the driver (D state) may not die: do not wait for it forever
            proc.communicate(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        raise NvmlHung(
            f"NVML did not answer within {timeout_s:g}s (wedged GPU driver?); worker killed",
            proc,
        ) from None
    if proc.returncode != 0:
        tail = (err or "").strip().splitlines()[-1:] or [""]
        raise ProbeError(f"NVML worker exited with {proc.returncode}: {tail[0][:200]}")
    return parse_worker_output(out)


class GpuProbe:
    """Per-capture GPU probe: remembers an answer that cannot change (no library installed),
    and a worker stuck in the driver: a process in D state survives SIGKILL, so while it lives
    no new worker is started - a day-long watch must not pile up one per sample."""

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._permanent: Optional[GpuSample] = None
        self._hung: Optional[subprocess.Popen[str]] = None

    def read(self) -> GpuSample:
        if self._permanent is not None:
            return self._permanent
        if self._hung is not None:
            if self._hung.poll() is None:
                raise ProbeError(
                    f"NVML still hung: worker PID {self._hung.pid} from an earlier sample has "
                    "not exited (wedged GPU driver); not starting another"
                )
            self._hung = None
        try:
            sample = read_gpu(self.timeout_s)
        except NvmlHung as exc:
            self._hung = exc.worker
            raise
        if not sample.available and any(p in (sample.reason or "") for p in _PERMANENT):
            self._permanent = sample
        return sample

    def call(self) -> ProbeCall[GpuSample]:
        """A runner call whose own deadline is a little later than the worker's kill."""
        return ProbeCall("gpu", self.read, timeout_s=self.timeout_s + 2.0)


def _visible_devices(value: str, devices: Sequence[GpuDevice]) -> List[int]:
    """CUDA_VISIBLE_DEVICES entries (indexes, GPU-UUIDs or UUID prefixes) → NVML indexes."""
    out: List[int] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        if item.isdigit():
            out.append(int(item))
            continue
        for dev in devices:
            if dev.uuid and (dev.uuid == item or dev.uuid.startswith(item)):
                out.append(dev.index)
                break
        else:
            return out  # CUDA stops at the first entry it cannot resolve
    return out


def map_devices(
    gpu: GpuSample, processes: Sequence[ProcessInfo]
) -> Dict[Tuple[str, int], Tuple[ProcessInfo, str]]:
    """(host, NVML index) → (process, how it was matched): ``pid``, ``pid:ancestor``, ``env``.

    PIDs win when NVML shows any PID we know; the environment only fills devices that no PID
    claimed, so a container that hides PIDs still gets a mapping. A merged bundle holds the
    GPUs of several hosts: each device is matched only to processes of its own host.
    """
    mapping: Dict[Tuple[str, int], Tuple[ProcessInfo, str]] = {}
    for host in sorted({d.host for d in gpu.devices}):
        devices = [d for d in gpu.devices if d.host == host]
        mine = [p for p in processes if p.host == host]
        by_pid = {p.pid: p for p in mine}
        for dev in devices:
            for gproc in dev.processes:
                owner, how = _owner(gproc.pid, by_pid)
                if owner is None:
                    continue
                # Prefer a rank over a helper when several of ours share one GPU.
                current = mapping.get((host, dev.index))
                if current is None or (owner.rank is not None and current[0].rank is None):
                    mapping[(host, dev.index)] = (owner, how)
        claimed = {info.pid for (h, _), (info, _) in mapping.items() if h == host}
        for info in mine:
            if info.pid in claimed or (info.rank is None and info.local_rank is None):
                continue
            index = _device_from_env(info, devices)
            if index is not None and (host, index) not in mapping:
                mapping[(host, index)] = (info, "env")
    return mapping


def map_devices_to_ranks(
    gpu: GpuSample, processes: Sequence[ProcessInfo]
) -> Dict[int, Tuple[ProcessInfo, str]]:
    """One host's view of ``map_devices``: NVML device index → (process, how matched)."""
    return {index: owner for (_host, index), owner in map_devices(gpu, processes).items()}


def _owner(pid: int, by_pid: Dict[int, ProcessInfo]) -> Tuple[Optional[ProcessInfo], str]:
    """The process of ours that holds this GPU context, or the rank it is a child of."""
    info = by_pid.get(pid)
    if info is None:
        return None, ""
    if info.rank is not None:
        return info, "pid"
    parent = info
    for _ in range(16):
        parent_info = by_pid.get(parent.ppid) if parent.ppid is not None else None
        if parent_info is None:
            break
        if parent_info.rank is not None:
            return parent_info, "pid:ancestor"
        parent = parent_info
    return info, "pid"


def _device_from_env(info: ProcessInfo, devices: Sequence[GpuDevice]) -> Optional[int]:
    local_rank = info.local_rank
    if local_rank is None:
        raw = info.env.get("LOCAL_RANK")
        local_rank = int(raw) if raw is not None and raw.isdigit() else None
    visible_raw = info.env.get("CUDA_VISIBLE_DEVICES")
    if visible_raw is not None:
        visible = _visible_devices(visible_raw, devices)
        if len(visible) == 1:
            return visible[0]
        if local_rank is not None and local_rank < len(visible):
            return visible[local_rank]
        return None
    if local_rank is not None and local_rank < len(devices):
        return local_rank
    return None
