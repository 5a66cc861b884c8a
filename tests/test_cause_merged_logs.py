"""Logs of a merged bundle: each node's file of one path is a log of its own (its host, its
writers), not one file whose size jumps between the nodes'.
"""

from __future__ import annotations


def test_two_hosts_logs_of_one_path_are_two_logs() -> None:
    """A merged bundle holds each node's /tmp/train.log: two files, not one whose size jumps
    between the nodes' (read as a rotation, then growth). Each keeps its host, and its writers
    are keys of that host only."""
    import msgspec
    from series import Proc, build

    from diag.model import LogSample
    from diag.verdict.progress import log_growth

    bundle = build([Proc(pid=10, stack=(("main", "/job/t.py"),))], n=3)
    sizes_a, size_b = (100, 100, 100), 5000  # node a's log is still, node b's far longer
    samples = tuple(
        msgspec.structs.replace(
            s,
            logs=(
                LogSample(path="/tmp/t.log", host="a", size_bytes=sizes_a[i], lines=3, pids=(10,)),
                LogSample(path="/tmp/t.log", host="b", size_bytes=size_b, lines=90, pids=(10,)),
            ),
        )
        for i, s in enumerate(bundle.samples)
    )
    logs = log_growth(msgspec.structs.replace(bundle, samples=samples))
    assert sorted((lg.host, lg.path, lg.grew_bytes) for lg in logs) == [
        ("a", "/tmp/t.log", 0),
        ("b", "/tmp/t.log", 0),
    ]
    assert {key for lg in logs for key in lg.writers} == {("a", 10), ("b", 10)}
