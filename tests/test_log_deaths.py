"""Who a log's death line names (diag.verdict.log_deaths): the dead rank, not the reporter."""

from __future__ import annotations

from typing import Optional, Tuple

import pytest

from diag.verdict.log_deaths import _speakers, _subject


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "(EngineCore pid=23819) ERROR 12-01 16:12:20 [multiproc_executor.py:315] Worker "
            "proc VllmWorker-1 died unexpectedly (exit code: None), shutting down executor.",
            (1, None),  # the engine's own pid is the reporter's, not the dead worker's
        ),
        (
            "[2026-12-01 10:00:00,000] torch.distributed.elastic.multiprocessing.api: [ERROR] "
            "failed (exitcode: -9) local_rank: 3 (pid: 4242) of binary: /usr/bin/python",
            (3, 4242),
        ),
        ("RayWorkerProc rank=2 died unexpectedly, shutting down executor.", (2, None)),
        ("[rank0]: ... worker process terminated unexpectedly", (None, None)),
        ("Segmentation fault (core dumped)", (None, None)),
    ],
)
def test_subject_of_a_death_line(line: str, expected: Tuple[Optional[int], Optional[int]]) -> None:
    assert _subject(line) == expected


def test_a_dead_rank_pid_from_its_own_earlier_prefix() -> None:
    lines = [
        "(Worker_TP0 pid=24118) INFO loading weights",
        "(Worker_TP1 pid=24119) INFO loading weights",
        "(EngineCore pid=23819) INFO ready",
    ]
    assert _speakers(lines) == {0: 24118, 1: 24119}
