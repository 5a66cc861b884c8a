"""View records of the report's machine section (see diag.render.machine)."""

from __future__ import annotations

from typing import Tuple

from diag.render.view_base import View


class MachineRow(View, frozen=True):
    """One process: what bounded its CPU over the capture, in words."""

    label: str  # "rank 1"
    anchor: str = ""
    host: str = ""
    limit: str = ""  # "0.03 of a core (/diag-test)"; "none"
    throttled: str = ""  # "99 % of 40 periods, 3.9 s"
    run_delay: str = ""  # "3.0 s of 4.0 s (76 %)"
    runnable: str = ""  # "3 of 3 samples"
    priority: str = ""  # "nice 19", "normal"
    cpuset: str = ""  # "0-1 (2 CPUs)"
    pressure: str = ""  # v2 cpu.pressure some avg10: "97 %"
    held: str = ""  # the cause when the machine holds it back: "CPU limit", "low priority"
    memory: str = ""  # "47.9 MiB of 48.0 MiB (100 %), 240526 limit events, 33 major faults/s"


class MachineGpuRow(View, frozen=True):
    """One GPU over the capture (issue #37): its clocks and why, its faults, in words."""

    label: str  # "GPU 3"
    host: str = ""
    owner: str = ""  # "rank 3"
    anchor: str = ""  # the owner's
    clock: str = ""  # "1,100 of 1,980 MHz"
    reasons: str = ""  # "HW thermal slowdown"; "" when no reason is set
    xids: str = ""  # "48, 79": the XIDs that arrived during the capture
    ecc: str = ""  # "2 uncorrected (2 during the capture), 120 corrected"
    pcie_replays: str = ""  # "17 (+17 during the capture)"
    pages: str = ""  # "3 rows remapped"; "2 pages retired"
    faults: str = ""  # the verdict's words: "XID 79: the GPU fell off the bus; ..."
    fatal: str = ""  # why its work ended: "fell off the bus (XID 79)"
    unread: str = ""  # "ecc: Not Supported"
    held: str = ""  # "throttled", "failed": the tag when it slows or ended its rank


class MachineView(View, frozen=True):
    """Per host: its load against its cores and CPU pressure; per process, its rows; per GPU,
    its clocks, throttle reasons and faults (``gpus``)."""

    host_line: str = ""  # "load 7.4 on 2 cores, 10 runnable; CPU pressure (some) 98 %"
    rows: Tuple[MachineRow, ...] = ()
    more: str = ""
    gpus: Tuple[MachineGpuRow, ...] = ()
