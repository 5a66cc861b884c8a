"""A GPU that slows its rank or has failed: clock-event (throttle) reasons, SM clock against
its ceiling, XIDs, ECC, retired pages / remapped rows, PCIe replays (issue #37).

Why: the commonest reason a healthy data-parallel job is slow on a GPU host is one GPU that
lowered its clocks for power or heat. Its rank computes at that GPU's pace and every other
rank waits for it in each collective; on the CPU side all ranks look alike (each sits in the
same synchronising call), so stacks alone name nobody. NVML says which GPU and why. And a GPU
that fell off the bus (XID 79) or hit an uncontained ECC error is a death, not a slow rank.

One definition each, read by the straggler analysis (``diag.verdict.stragglers``), the
evidence sources, the rule ``gpu_failed`` and the report's machine section:

- ``gpu_states``: per GPU over the capture, its median SM clock, its ceiling, the throttle
  reasons set in most of its samples, XIDs seen, ECC and replay counts and their growth.
- throttled: a slowing reason (``SLOWING``) in at least half of its samples and its SM clock
  at most ``CLOCK_SHARE`` of its ceiling.
- ``gpu_stragglers``: among a job's ranks, the few whose GPU is throttled while the others'
  are not and run clearly faster.

Pure functions of the model; may import the model and ``diag.verdict`` modules below the rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import (
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Sequence,
    Set,
    Tuple,
    TypeVar,
)

from diag.model import (
    CLOCK_EVENT_WORDS,
    Bundle,
    Evidence,
    GpuDevice,
    GpuHealthRecord,
    GpuSample,
    ProcessInfo,
    Suspect,
    clock_event_names,
)
from diag.text.units import rank_set
from diag.verdict.bundle_index import derived
from diag.verdict.gpu import map_devices
from diag.verdict.sources import Context, Finding

# Reasons that slow a GPU below what its work asks for, worst first (the order they are said).
SLOWING: Tuple[str, ...] = (
    "hw_thermal_slowdown",
    "hw_power_brake",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "sw_power_cap",
)
REASON_WORDS = CLOCK_EVENT_WORDS  # one definition, the model's
REMEDY: Dict[str, str] = {
    "hw_thermal_slowdown": "check its cooling (fans, airflow, inlet temperature)",
    "sw_thermal_slowdown": "check its cooling (fans, airflow, inlet temperature)",
    "hw_power_brake": "an external power brake is asserted: have the node's power checked",
    "hw_slowdown": "the board asserts a slowdown (power or heat): have the node checked",
    "sw_power_cap": "check its power limit (nvidia-smi -q -d POWER) against its peers'",
}
CLOCK_SHARE = 0.9  # of its ceiling (or of its peers' clock), at most, to be throttled
PEER_CLOCK_SHARE = 0.9  # a GPU straggler's clock against the other ranks' GPUs' median
# XIDs that end the work on the GPU: the rank on it cannot go on.
FATAL_XIDS: Dict[int, str] = {  # what the GPU did, said after its name
    79: "fell off the bus",
    95: "hit an uncontained ECC error",
}
XID_WORDS: Dict[int, str] = {
    79: "the GPU fell off the bus",
    95: "an uncontained ECC error (the GPU needs a reset)",
    13: "a graphics engine exception (often the application's own fault)",
    31: "a GPU memory page fault (often the application's own fault)",
    43: "the GPU stopped processing (a kernel was killed)",
    45: "preemptive cleanup after an earlier fault",
    48: "a double-bit ECC error",
    63: "an ECC page retirement or row remap",
    64: "a failed ECC page retirement or row remap",
    74: "an NVLink error",
    92: "a high single-bit ECC error rate",
    94: "a contained ECC error (the processes on it must restart)",
    119: "a GSP RPC timeout",
    120: "a GSP error",
}

Key = Tuple[str, int]
T = TypeVar("T")
MAX_GPU_HEALTH = 64  # GPUs a verdict keeps (8 a node: 8 nodes' worth)


@dataclass
class GpuState:
    """One GPU over the capture (the samples that read it)."""

    key: Key
    samples: int = 0
    clocks: List[int] = field(default_factory=list)
    sm_max_mhz: Optional[int] = None
    reason_counts: Dict[str, int] = field(default_factory=dict)
    masked_samples: int = 0  # samples that read a reason mask at all
    xids: List[int] = field(default_factory=list)
    first: Optional[GpuDevice] = None
    last: Optional[GpuDevice] = None
    lost: str = ""  # NVML's error for the device ("GPU is lost")

    @property
    def sm_mhz(self) -> Optional[int]:
        return int(median(self.clocks)) if self.clocks else None

    @property
    def reasons(self) -> Tuple[str, ...]:
        """Reasons set in at least half of the samples that read a mask, worst first."""
        held = {r for r, n in self.reason_counts.items() if n * 2 >= max(1, self.masked_samples)}
        return tuple(r for r in SLOWING if r in held) + tuple(
            sorted(r for r in held if r not in SLOWING)
        )

    @property
    def slowing(self) -> Tuple[str, ...]:
        return tuple(r for r in self.reasons if r in SLOWING)

    @property
    def throttled(self) -> bool:
        mhz, top = self.sm_mhz, self.sm_max_mhz
        return bool(self.slowing) and (mhz is None or not top or mhz <= top * CLOCK_SHARE)

    def grown(self, name: str) -> Optional[int]:
        a = getattr(self.first, name, None) if self.first else None
        b = getattr(self.last, name, None) if self.last else None
        return b - a if isinstance(a, int) and isinstance(b, int) and b >= a else None

    def fatal(self) -> Optional[str]:
        """Why the work on this GPU has ended, or None."""
        for xid in self.xids:
            if xid in FATAL_XIDS:
                return f"{FATAL_XIDS[xid]} (XID {xid})"
        return f"is lost (NVML: {self.lost})" if "lost" in self.lost.lower() else None


def _memo(name: str, bundle: Bundle, compute: Callable[[Bundle], T]) -> T:
    """One pass per bundle however many readers (evidence, record, stragglers, the rule): at
    4,096 ranks on 512 nodes a mapping of GPUs to processes is not free (``bundle_index``)."""
    return derived(("gpu_health", name), bundle, compute, bundle)


def gpu_states(bundle: Bundle) -> Dict[Key, GpuState]:
    """Per GPU (host, index), what the capture read of it (shared: do not modify)."""
    return _memo("states", bundle, _gpu_states)


def _gpu_states(bundle: Bundle) -> Dict[Key, GpuState]:
    out: Dict[Key, GpuState] = {}
    for sample in bundle.samples:
        if sample.gpu is None or not sample.gpu.available:
            continue
        for dev in sample.gpu.devices:
            key = (dev.host, dev.index)
            st = out.setdefault(key, GpuState(key))
            st.samples += 1
            st.xids.extend(x.xid for x in dev.xids)
            if dev.error:
                st.lost = dev.error
                continue
            st.first = st.first or dev
            st.last = dev
            if dev.sm_clock_mhz is not None:
                st.clocks.append(dev.sm_clock_mhz)
            if dev.sm_clock_max_mhz:
                st.sm_max_mhz = dev.sm_clock_max_mhz
            if dev.clock_event_mask is not None:
                st.masked_samples += 1
                for name in clock_event_names(dev.clock_event_mask):
                    st.reason_counts[name] = st.reason_counts.get(name, 0) + 1
    return out


OWNER_SAMPLES = 8  # the last samples with GPUs whose process lists map GPUs to ranks


def gpu_owners(bundle: Bundle) -> Dict[Key, ProcessInfo]:
    """(host, index) -> the job's process on it, the last sample's mapping; a GPU it leaves
    unmapped (lost mid-capture, it lists no process any more) is looked up in the earlier
    samples (at most ``OWNER_SAMPLES``) that still said whose it was."""
    return _memo("owners", bundle, _gpu_owners)


def _gpu_owners(bundle: Bundle) -> Dict[Key, ProcessInfo]:
    reads: List[GpuSample] = [s.gpu for s in bundle.samples if s.gpu and s.gpu.available]
    if not reads:
        return {}
    out = {k: v[0] for k, v in map_devices(reads[-1], bundle.processes).items()}
    for gpu in reversed(reads[-OWNER_SAMPLES:-1]):
        if all((d.host, d.index) in out for d in reads[-1].devices):
            break
        earlier = map_devices(gpu, bundle.processes)
        out.update({k: v[0] for k, v in earlier.items() if k not in out})
    return out


def _mhz(value: int) -> str:
    return f"{value:,}"


def clock_text(st: GpuState) -> str:
    """ "GPU 3 runs at 1,100 of 1,980 MHz, throttled by HW thermal slowdown"."""
    name = f"GPU {st.key[1]}"
    mhz, top = st.sm_mhz, st.sm_max_mhz
    if mhz is not None and top:
        runs = f"{name} runs at {_mhz(mhz)} of {_mhz(top)} MHz"
    elif mhz is not None:
        runs = f"{name} runs at {_mhz(mhz)} MHz"
    else:
        runs = f"{name} runs"
    words = " and ".join(REASON_WORDS[r] for r in st.slowing)
    return f"{runs}, throttled by {words}" if words else runs


def remedy(st: GpuState) -> str:
    return REMEDY.get(st.slowing[0], "") if st.slowing else ""


def throttle_causes(bundle: Bundle, ranks: Iterable[Tuple[str, int]]) -> Dict[Tuple[str, int], str]:
    """(host, rank) -> "its GPU 3 runs at 1,100 of 1,980 MHz, throttled by ..." for the given
    ranks whose GPU is throttled."""
    wanted = set(ranks)
    states = gpu_states(bundle)
    out: Dict[Tuple[str, int], str] = {}
    for key, owner in gpu_owners(bundle).items():
        st = states.get(key)
        if owner.rank is None or st is None or not st.throttled:
            continue
        if (key[0], owner.rank) in wanted:
            out[(key[0], owner.rank)] = f"its {clock_text(st)}"
    return out


def throttle_tail(bundle: Bundle, ranks: Sequence[Tuple[str, int]]) -> str:
    """ "; rank 2's GPU 2 runs at 1,100 of 1,980 MHz, throttled by HW thermal slowdown" for
    the named stragglers whose GPU is throttled: why the rank the others wait for is slow."""
    causes = throttle_causes(bundle, ranks)
    return "".join(f"; rank {r}'s {causes[(h, r)][4:]}" for h, r in ranks if (h, r) in causes)


def gpu_stragglers(bundle: Bundle, ranks: Sequence[Tuple[str, int]]) -> Dict[Tuple[str, int], str]:
    """Among the job's ranks (host, rank), those whose GPU is throttled while the other ranks'
    GPUs are not and run at least 10 % faster: (host, rank) -> the sentence. At most a quarter
    of the ranks (one of two or three): a job whose GPUs all throttle alike has no straggler."""
    states = gpu_states(bundle)
    wanted = set(ranks)
    owned: Dict[Tuple[str, int], GpuState] = {}
    for key, owner in gpu_owners(bundle).items():
        if owner.rank is not None and (key[0], owner.rank) in wanted and key in states:
            owned[(key[0], owner.rank)] = states[key]
    slow = [r for r, st in owned.items() if st.throttled and st.sm_mhz is not None]
    if not slow or len(owned) < 2 or len(slow) > max(1, len(owned) // 4):
        return {}
    others = [st for r, st in owned.items() if r not in slow]
    clocks = [st.sm_mhz for st in others if st.sm_mhz is not None]
    if not clocks or any(st.throttled for st in others):
        return {}
    peer_mhz = median(clocks)
    out: Dict[Tuple[str, int], str] = {}
    for r in slow:
        st = owned[r]
        if (st.sm_mhz or 0) <= peer_mhz * PEER_CLOCK_SHARE:
            cure = f" - {remedy(st)}" if remedy(st) else ""
            out[r] = (
                f"its {clock_text(st)} (the other ranks' GPUs at {_mhz(int(peer_mhz))} MHz): "
                f"the job runs at its GPU's pace{cure}"
            )
    return out


def _who(key: Key, owners: Dict[Key, ProcessInfo]) -> Tuple[str, Optional[ProcessInfo]]:
    host, index = key
    info = owners.get(key)
    where = f" on {host}" if host else ""
    rank = f" (rank {info.rank})" if info is not None and info.rank is not None else ""
    return f"GPU {index}{where}{rank}", info


def fatal_gpus(bundle: Bundle) -> List[Tuple[GpuState, ProcessInfo, str]]:
    """Job processes whose GPU's work has ended (XID 79, an uncontained ECC error, lost)."""
    owners = gpu_owners(bundle)
    out = []
    for key, st in sorted(gpu_states(bundle).items()):
        why = st.fatal()
        info = owners.get(key)
        if why and info is not None:
            out.append((st, info, why))
    return out


def failed_sentence(
    failed: Sequence[Tuple[GpuState, ProcessInfo, str]], others: Sequence[Optional[int]]
) -> str:
    """ "deadlocked: rank 3's GPU 3 fell off the bus (XID 79) - rank 3 cannot go on;
    ranks 0-2 wait for it until their collective timeout - ..."."""
    parts, names = [], []
    for st, info, why in failed:
        name = f"rank {info.rank}" if info.rank is not None else f"pid {info.pid}"
        where = f" on {st.key[0]}" if st.key[0] else ""
        parts.append(f"{name}'s GPU {st.key[1]}{where} {why}")
        names.append(name)
    ranks = sorted(r for r in others if r is not None)
    wait = f"; {rank_set(ranks)} wait for it until their collective timeout" if ranks else ""
    return (
        f"{'; '.join(parts)} - {', '.join(names)} cannot go on{wait} - a death, "
        "not a slow rank: the GPU needs a reset or service (drain the node); restart the job "
        "without it"
    )


def _fault_lines(st: GpuState) -> List[str]:
    lines: List[str] = []
    seen: Set[int] = set()
    for xid in st.xids:
        if xid in seen:
            continue
        seen.add(xid)
        n = st.xids.count(xid)
        times = f" ({n} times)" if n > 1 else ""
        lines.append(f"XID {xid}{times}: {XID_WORDS.get(xid, 'see NVIDIA XID catalog')}")
    last = st.last
    if last is not None:
        unc = last.ecc_volatile_uncorrected
        if unc:
            new = st.grown("ecc_volatile_uncorrected")
            fresh = f", {new} during the capture" if new else ""
            lines.append(f"{unc} uncorrected ECC error(s) since the driver loaded{fresh}")
        if last.remap_failed:
            lines.append("a row remap failed: the GPU needs service")
        elif last.remap_pending or last.retired_pages_pending:
            lines.append("a memory row remap / page retirement waits for a GPU reset")
        replays = st.grown("pcie_replays")
        if replays:
            lines.append(f"its PCIe link replayed {replays} time(s) during the capture")
    return lines


def gpu_health_findings(ctx: Context) -> Iterable[Finding]:
    """Evidence: a throttled GPU (signal gpu), and a GPU's faults during or before the capture
    (signal gpu-error: XIDs, uncorrected ECC, a failed or pending remap, PCIe replays)."""
    owners = gpu_owners(ctx.bundle)
    for key, st in sorted(gpu_states(ctx.bundle).items()):
        who, info = _who(key, owners)
        ranks = (info.rank,) if info is not None and info.rank is not None else ()
        pids = (info.pid,) if info is not None else ()
        if st.throttled:
            detail = f"{who}: {clock_text(st)}"
            detail = detail.replace(f"{who}: GPU {key[1]} ", f"{who} ")
            yield Finding(Evidence("gpu", detail, ranks, pids, section="machine"))
        faults = _fault_lines(st)
        if not faults:
            continue
        detail = f"{who}: " + "; ".join(faults)
        suspects: Tuple[Suspect, ...] = ()
        if info is not None and st.fatal():
            suspects = (Suspect(pid=info.pid, rank=info.rank, host=info.host, reason=detail),)
        yield Finding(Evidence("gpu-error", detail, ranks, pids, section="machine"), suspects)


def health_records(bundle: Bundle) -> Tuple[GpuHealthRecord, ...]:
    """The verdict's record per GPU (the report's machine section reads it); () for bundles
    written before the throttle reasons were read, so their JSON stays as it was."""
    states = gpu_states(bundle)
    if not any(st.masked_samples or st.sm_max_mhz or st.xids or st.lost for st in states.values()):
        return ()
    owners = gpu_owners(bundle)
    out = []
    for key, st in sorted(states.items()):
        info = owners.get(key)
        last = st.last
        out.append(
            GpuHealthRecord(
                index=key[1],
                host=key[0],
                rank=info.rank if info is not None else None,
                pid=info.pid if info is not None else None,
                samples=st.samples,
                sm_clock_mhz=st.sm_mhz,
                sm_clock_max_mhz=st.sm_max_mhz,
                reasons=st.reasons,
                throttled=st.throttled,
                xids=tuple(st.xids[:64]),
                ecc_uncorrected=last.ecc_volatile_uncorrected if last else None,
                ecc_corrected=last.ecc_volatile_corrected if last else None,
                ecc_uncorrected_new=st.grown("ecc_volatile_uncorrected"),
                pcie_replays=last.pcie_replays if last else None,
                pcie_replays_new=st.grown("pcie_replays"),
                remapped_rows=(
                    (last.remapped_rows_correctable or 0) + (last.remapped_rows_uncorrectable or 0)
                    if last and last.remapped_rows_correctable is not None
                    else None
                ),
                retired_pages=(
                    (last.retired_pages_sbe or 0) + (last.retired_pages_dbe or 0)
                    if last and last.retired_pages_sbe is not None
                    else None
                ),
                faults=tuple(_fault_lines(st)),
                fatal=st.fatal() or "",
                unread=tuple(sorted(f"{k}: {v}" for k, v in (last.unread if last else {}).items())),
            )
        )
    return tuple(out[:MAX_GPU_HEALTH])


__all__ = [
    "FATAL_XIDS",
    "GpuState",
    "clock_text",
    "failed_sentence",
    "fatal_gpus",
    "gpu_health_findings",
    "gpu_owners",
    "gpu_states",
    "gpu_stragglers",
    "health_records",
    "throttle_causes",
    "throttle_tail",
]
