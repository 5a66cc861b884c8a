"""Rule ``rank_stopped``'s remedy by who holds the rank: a tracer (state t: SIGCONT does not
resume it) or a frozen cgroup (thaw it), not "kill -CONT" or "storage not answering".
"""

from __future__ import annotations


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


def test_a_stopped_rank_says_since_when_from_its_threads_last_run() -> None:
    """Its threads' time off the CPU (the kernel's ``se.exec_start``) dates the stop: every
    thread ran to stop itself. The verdict says "for ≥ ..." and keeps ``stopped_since_s``."""
    import msgspec
    from series import Proc, build

    from diag.verdict.classify import classify

    allreduce = (("all_reduce", "/torch/distributed/distributed_c10d.py"), ("train", "/j/t.py"))
    waiter = Proc(pid=10, rank=0, world_size=2, rank_source="env:RANK", stack=allreduce)
    held = Proc(
        pid=11, rank=1, world_size=2, rank_source="env:RANK", stack=(("train", "/j/t.py"),),
        state="T", wchan="do_signal_stop", syscall=None,
    )  # fmt: skip
    bundle = build([waiter, held], n=3)
    samples = []
    for i, sample in enumerate(bundle.samples):
        procs = []
        for ps in sample.processes:
            if ps.pid == 11:
                aged = tuple(
                    msgspec.structs.replace(t, off_cpu_s=130.0 + 2 * i) for t in ps.threads
                )
                ps = msgspec.structs.replace(ps, threads=aged)
            procs.append(ps)
        samples.append(msgspec.structs.replace(sample, processes=tuple(procs)))
    verdict = classify(msgspec.structs.replace(bundle, samples=tuple(samples)))
    assert verdict.rule == "rank_stopped", verdict.summary
    assert "or a debugger) for ≥ 2 min 14 s (since " in verdict.summary, verdict.summary
    assert verdict.stopped_since_s == bundle.samples[-1].t_s - 134.0
    # Without the kernel's reading, nothing is said rather than a guess.
    plain = classify(bundle)
    assert "for ≥" not in plain.summary and plain.stopped_since_s is None
