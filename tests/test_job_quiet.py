"""Since when the whole job has been quiet (#33): the latest of its ranks' last run (kernel),
its logs' last write (mtime) and the last byte between its processes (tcp_info), bounded by
its start. A recorded deadlock (gloo_retry_never_ready: its ranks' gloo connections last
carried data 13.3 s before the last sample) edited to say the ranks last ran 10 min ago; the
real-process check is tests/test_wait_age_real.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diag.verdict import classify
from tests.recorded_variants import BUNDLES, Json, load_variant


def _variant(log_age_s: float) -> Json:
    data: Json = json.loads((BUNDLES / "gloo_retry_never_ready.json").read_text())
    data.pop("verdict", None)
    last = data["samples"][-1]
    for ps in last["processes"]:
        for t in ps["threads"]:
            if t["tid"] == ps["pid"]:
                t["off_cpu_s"] = 600.0
    for log in last["logs"]:
        log["mtime_s"] = last["t_s"] - log_age_s
    return data


def test_quiet_since_the_last_byte_between_its_processes(tmp_path: Path) -> None:
    data = _variant(log_age_s=20.0)
    last_t = data["samples"][-1]["t_s"]
    verdict = classify(load_variant(data, tmp_path))
    assert verdict.state == "deadlocked", verdict.summary
    assert verdict.job_quiet_since_s == pytest.approx(last_t - 13.3, abs=0.05)
    assert "; nothing in this job has done useful work since " in verdict.summary
    assert "(13 s ago: its ranks last ran at " in verdict.summary, verdict.summary
    assert "its log silent since" in verdict.summary
    assert "the last byte between its processes at" in verdict.summary
    assert "it started 26 s ago" in verdict.summary, verdict.summary


def test_a_log_written_a_moment_ago_gives_no_line(tmp_path: Path) -> None:
    """Its retry loop logged 0.3 s before the last sample: something in the job moves."""
    verdict = classify(load_variant(_variant(log_age_s=0.3), tmp_path))
    assert verdict.job_quiet_since_s is None
    assert "nothing in this job" not in verdict.summary


def test_a_wait_age_counts_back_from_when_the_process_was_read(tmp_path: Path) -> None:
    """A loaded host reads a process a second or more into the sample: its threads' time off
    the CPU is measured then, so 'since' is that read's time minus it, not the sample's."""
    data = _variant(log_age_s=20.0)
    last = data["samples"][-1]
    for ps in last["processes"]:
        ps["t_s"] = last["t_s"] + 2.0
    verdict = classify(load_variant(data, tmp_path))
    assert verdict.quiet_since_s == pytest.approx(last["t_s"] + 2.0 - 600.0, abs=0.05)
