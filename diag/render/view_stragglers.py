"""View records of the report's straggler section (see diag.render.stragglers)."""

from __future__ import annotations

from typing import Tuple

from diag.render.view_base import View


class StragglerRow(View, frozen=True):
    """One rank: how much of the capture it waited for the others (the bar), computed, burnt."""

    label: str  # "rank 2"
    anchor: str = ""
    host: str = ""
    wait_pct: int = 0  # the "waits for others" bar, 0-100
    wait_text: str = ""  # "67 % (2 of 3 samples) in `all_reduce`"
    compute_text: str = ""  # "33 % (1 of 3)"
    main_cpu: str = ""  # "97 %"
    cpu: str = ""
    # Its main-thread CPU against the busiest rank's: in a job that syncs every step, a rank
    # at a quarter of the busiest one's CPU waits the rest of each step, even where no sample
    # caught it waiting.
    vs_busiest: str = ""
    flight_recorder: str = ""  # "#412, enqueues +180 ms, 4 ms each"; "" without a dump
    suspect: bool = False


class StragglersView(View, frozen=True):
    """The analysis: its sentence, who is named (or that nobody is), the rows."""

    summary: str
    named: bool = False
    basis: str = ""  # "main-thread samples and CPU" / "Flight Recorder enqueue times"
    nodes: str = ""  # the straggler node(s) of a merged bundle
    rows: Tuple[StragglerRow, ...] = ()
    more: str = ""  # "4,032 more ranks not shown"
