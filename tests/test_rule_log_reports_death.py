"""Rule ``log_reports_death``: a rank reaped before the first sample is no process of the
bundle; the job's own log line about it names the dead rank (and its pid), not the peer
that followed it.
"""

from __future__ import annotations


def test_a_scheduler_reaped_before_the_first_sample_is_named_from_the_log() -> None:
    """SGLang TP 2 with scheduler TP1 SIGKILLed: under load the first sample came after the
    main process had reaped it, so no process of the bundle is TP1 - only TP0's zombie. The
    main process logged "Subprocess scheduler_1 (pid=N) crashed with exit code -9": that
    line names the dead rank (CI's fresh clone blamed TP0, which only followed it)."""
    from conftest import REPO

    from diag.bundle.io import load_bundle
    from diag.commands.judge import judge

    verdict = judge(load_bundle(REPO / "samples/bundles/sglang_tp2_rank_reaped.json"))
    assert (verdict.state, verdict.rule) == ("deadlocked", "log_reports_death"), verdict.summary
    lead = verdict.suspects[0]
    assert (lead.rank, lead.pid) == (1, 22580), verdict.summary
    assert "crashed with exit code -9" in verdict.summary
