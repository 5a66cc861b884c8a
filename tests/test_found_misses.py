"""Misses found on programs the suite had not seen (or in CI), each pinned by the smallest
input that shows it: a known pitfall's fix beside "kill it" (the sentence is the feature; the
live program is the scenario mp_queue_join_before_get), compilers reaped by their parent read
as dead ranks."""

from __future__ import annotations

from diag.verdict.rules import words

JOIN_BEFORE_GET = (
    "pid 10 python, pid 11 python: a cycle - they wait on each other (child, pipe), nothing "
    "else ends it: pid 10 python waits for its children in `BaseProcess.join` ← `<module>`; "
    "pid 11 python its thread QueueFeederThread writes fd 4 (pipe:[1]); pid 10 python holds "
    "its read end (fd 3) - kill it, nothing will end these waits"
)


def test_join_before_get_names_the_fix() -> None:
    text = words.chains_never_end([JOIN_BEFORE_GET])
    assert text.endswith("call `q.get()` before `p.join()`")


def test_another_cycle_gets_no_pitfall_line() -> None:
    other = JOIN_BEFORE_GET.replace("QueueFeederThread", "writer")
    assert "pitfall" not in words.chains_never_end([other])


def test_compilers_their_parent_reaped_are_no_dead_ranks() -> None:
    """torch.compile's g++ and cc1plus come and go, each reaped (gone from /proc, code unread)
    while the parent waits on its compile futures: slow, never "they will never finish; kill
    the job" (CI once read this capture as rank_died)."""
    from series import Proc, build

    from diag.verdict.classify import classify

    result = (("result", "/usr/lib/python3.11/concurrent/futures/_base.py"),)
    parent = Proc(
        pid=100, role="launcher", stack=(*result, ("<module>", "/job/c.py")), children_pct=90.0
    )
    gone = ["alive", "exited", "exited"]
    gxx = Proc(pid=101, ppid=100, role="worker", cmdline=("g++", "x.cpp"), python=False,
               status=gone, cpu_pct=5.0)  # fmt: skip
    cc1 = Proc(pid=102, ppid=101, role="worker", cmdline=("cc1plus",), python=False,
               status=gone, cpu_pct=90.0)  # fmt: skip
    verdict = classify(build([parent, gxx, cc1], n=3))
    assert verdict.rule != "rank_died" and verdict.state == "slow", verdict.summary


def _stopped_pair(state: str, wchan: str) -> str:
    """Rank 1 in ``state``/``wchan`` in every sample while rank 0 waits for it: the summary."""
    from series import Proc, build

    from diag.verdict.classify import classify

    allreduce = (("all_reduce", "/torch/distributed/distributed_c10d.py"), ("train", "/j/t.py"))
    waiter = Proc(pid=10, rank=0, world_size=2, rank_source="env:RANK", stack=allreduce)
    held = Proc(pid=11, rank=1, world_size=2, rank_source="env:RANK",
                stack=(("train", "/j/t.py"),), state=state, wchan=wchan, syscall=None)  # fmt: skip
    verdict = classify(build([waiter, held], n=3))
    assert (verdict.state, verdict.rule) == ("deadlocked", "rank_stopped"), verdict.summary
    return verdict.summary


def test_a_rank_held_by_a_tracer_is_not_told_to_take_kill_cont() -> None:
    """State t in every sample (gdb, strace): SIGCONT leaves it stopped - the tracer must let
    it go. Found on a program the suite had not seen."""
    summary = _stopped_pair("t", "ptrace_stop")
    assert "held by a tracer" in summary and "does not resume a traced process" in summary


def test_a_rank_frozen_by_its_cgroup_is_thawed_not_blamed_on_storage() -> None:
    """cgroup v1's freezer parks every thread in D at __refrigerator (docker pause, a Slurm
    suspend): not "storage or NFS not answering" - thaw it."""
    summary = _stopped_pair("D", "__refrigerator")
    assert "frozen by its cgroup" in summary and "docker unpause" in summary
    assert "kill -CONT 11` (or" not in summary


def test_api_server_caught_running_keeps_its_port() -> None:
    """CI once read SGLang TP 2 idle with the HTTP front end's main thread running at the last
    sample (no wait to read): its port went missing and the summary named only scheduler TP0's
    store port. The framework's API server keeps its door, and the door comes first."""
    import json
    import tempfile
    from pathlib import Path

    from conftest import REPO

    from diag.bundle.io import load_bundle
    from diag.commands.judge import judge

    raw = json.loads((REPO / "samples/bundles/sglang_real_tp2_sleep_idle.json").read_text())
    root = raw["samples"][-1]["processes"][0]
    http = root["listen_ports"][0]
    root["threads"][0].update(stack_id=None, state="R", wchan=None, syscall=None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "b.json"
        path.write_text(json.dumps(raw))
        verdict = judge(load_bundle(path))
    assert verdict.state == "idle", verdict.summary
    assert f"waits on a peer, :{http}," in verdict.summary, verdict.summary


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
