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


class MachineView(View, frozen=True):
    """Per host: its load against its cores and CPU pressure; per process, its rows."""

    host_line: str = ""  # "load 7.4 on 2 cores, 10 runnable; CPU pressure (some) 98 %"
    rows: Tuple[MachineRow, ...] = ()
    more: str = ""
