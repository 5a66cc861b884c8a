"""NCCL RAS: the probe against a fake `ncclras` client printing NCCL 2.28's JSON format.

The fake (tests/fake_nvml/bin/ncclras) prints what client_support.cc's JSON writer prints:
per communicator ``ranks`` with ``collective_counts`` and ``status``, and ``missing_ranks``.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest
from conftest import REPO

from diag.probes.nccl.ras import RasProbe, parse_json, query
from diag.probes.runner import ProbeError
from diag.verdict.collectives import ras_findings

FAKE_BIN = REPO / "tests" / "fake_nvml" / "bin"
FAKE = str(FAKE_BIN / "ncclras")


@pytest.fixture
def ras_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in ("FAKE_NCCLRAS_MODE", "FAKE_NCCLRAS_COUNTS", "FAKE_NCCLRAS_MISSING"):
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch


def test_absent_client_records_nothing(ras_env: pytest.MonkeyPatch) -> None:
    ras_env.setenv("PATH", "/nonexistent")
    assert RasProbe().available() is False


def test_found_on_path(ras_env: pytest.MonkeyPatch) -> None:
    ras_env.setenv("PATH", os.pathsep.join([str(FAKE_BIN), os.environ["PATH"]]))
    assert RasProbe().executable == FAKE


def test_json_view_and_the_lagging_rank(ras_env: pytest.MonkeyPatch) -> None:
    snap = query(FAKE, timeout_s=10)
    assert snap.nccl_version == "2.28.7"
    (comm,) = snap.communicators
    assert comm.comm_hash == "0x5f3a9c0d12ab34ef" and comm.size == 4
    assert [r.coll_counts["AllReduce"] for r in comm.ranks] == [120, 120, 120, 119]
    findings = ras_findings([snap])
    assert [f.evidence.ranks for f in findings] == [(3,)]
    assert "launched 121 collectives, others 122" in findings[0].evidence.detail
    assert findings[0].suspects[0].pid == 4003


def test_missing_dead_rank(ras_env: pytest.MonkeyPatch) -> None:
    ras_env.setenv("FAKE_NCCLRAS_COUNTS", "50,50,50,50")
    ras_env.setenv("FAKE_NCCLRAS_MISSING", "2")
    snap = query(FAKE, timeout_s=10)
    assert snap.communicators[0].missing_ranks == 1
    dead = [r for r in snap.communicators[0].ranks if r.missing]
    assert [(r.rank, r.dead) for r in dead] == [(2, True)]
    findings = ras_findings([snap])
    assert [f.evidence.ranks for f in findings] == [(2,)]
    assert "considered dead" in findings[0].evidence.detail


def test_frozen_counts_lean_stuck_rising_lean_progress(ras_env: pytest.MonkeyPatch) -> None:
    ras_env.setenv("FAKE_NCCLRAS_COUNTS", "50,50")
    first = query(FAKE, timeout_s=10)
    again = query(FAKE, timeout_s=10)
    ras_env.setenv("FAKE_NCCLRAS_COUNTS", "60,60")
    later = query(FAKE, timeout_s=10)
    assert [f.lean for f in ras_findings([first, again])] == ["stuck"]
    assert [f.lean for f in ras_findings([first, later])] == ["progress"]


def test_old_client_falls_back_to_text(ras_env: pytest.MonkeyPatch) -> None:
    ras_env.setenv("FAKE_NCCLRAS_MODE", "old")
    snap = query(FAKE, timeout_s=10, scrub=lambda s: s.replace("2.24.3", "X"))
    assert snap.communicators == ()
    assert "Job summary" in snap.text and "NCCL version X" in snap.text
    assert ras_findings([snap]) == []


def test_hanging_client_times_out(ras_env: pytest.MonkeyPatch) -> None:
    ras_env.setenv("FAKE_NCCLRAS_MODE", "hang")
    with pytest.raises(ProbeError, match="did not answer within 2s"):
        query(FAKE, timeout_s=2)


def test_parse_rejects_other_json() -> None:
    with pytest.raises(ValueError):
        parse_json('{"nccl_version": "2.28.7"}')
