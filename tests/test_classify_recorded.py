"""Golden inputs: bundles recorded from real scenario runs still get the scenario's verdict.

``samples/bundles/<scenario>.json`` were written by ``samples/run_scenarios.py --record``; the
classifier is re-run on them (no processes), so a change in the rules that breaks a real case
shows up in a fast test, not only in the slow scenario suite.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, List

import pytest
from conftest import REPO

from diag.bundle.io import load_bundle
from diag.verdict.classify import classify

BUNDLES = REPO / "samples" / "bundles"
_spec = importlib.util.spec_from_file_location(
    "run_scenarios", REPO / "samples" / "run_scenarios.py"
)
assert _spec is not None and _spec.loader is not None
run_scenarios = sys.modules.get("run_scenarios") or importlib.util.module_from_spec(_spec)
if "run_scenarios" not in sys.modules:
    sys.modules["run_scenarios"] = run_scenarios
    _spec.loader.exec_module(run_scenarios)
EXPECT = {s.name: s for s in run_scenarios.SCENARIOS}


def _recorded() -> List[Any]:
    return [pytest.param(p, id=p.stem) for p in sorted(BUNDLES.glob("*.json")) if p.stem in EXPECT]


def test_recorded_bundles_exist() -> None:
    assert len(_recorded()) >= 8


@pytest.mark.parametrize("path", _recorded())
def test_recorded_verdict(path: Path) -> None:
    scenario = EXPECT[path.stem]
    bundle = load_bundle(path)
    verdict = classify(bundle)
    assert scenario.accepts(verdict.state), verdict.summary
    assert verdict.summary.startswith(verdict.state)  # the line leads with the state
    if scenario.rules:
        assert verdict.rule in scenario.rules, verdict.summary
    if scenario.suspects:
        for expected in scenario.suspects:
            kind, _, value = expected.partition(":")
            if kind == "rank":
                assert int(value) in [s.rank for s in verdict.suspects], verdict.summary
            else:
                assert bundle.target.root_pid in [s.pid for s in verdict.suspects]
    elif scenario.suspects == ():
        assert verdict.suspects == (), verdict.summary


@pytest.mark.parametrize("path", _recorded())
def test_one_sample_of_a_recording_lowers_confidence(path: Path) -> None:
    """Cut to its first sample, a recording still gets a verdict, marked as uncertain."""
    import msgspec

    bundle = load_bundle(path)
    first = msgspec.structs.replace(bundle, samples=bundle.samples[:1])
    verdict = classify(first)
    assert verdict.confidence <= 0.5
    # the wording is the feature: the verdict says it rests on one sample
    assert "one sample" in verdict.summary or verdict.state == "exited"


# Real vLLM 0.32 CPU captures (tests/test_vllm_real.py, DIAG_VLLM_RECORD): the verdict each must
# keep, the rule that decides it, and the pid that must lead the suspects (None: no suspect
# expected).
VLLM = {
    "vllm_idle_ready": ("idle", "waits_for_outside", None),
    "vllm_idle_after_requests": ("idle", "waits_for_outside", None),
    # the zero-counter stats line is no progress
    "vllm_idle_stats_line": ("idle", "waits_for_outside", None),
    "vllm_load": ("progressing", "output_moves", None),
    # Importing and building: CPU-bound, no output (4 B of eventfd wake-ups are no output).
    "vllm_startup_api": ("slow", "works_silently", None),
    "vllm_startup_engine": ("slow", "works_silently", None),
    "vllm_engine_sigstop": ("deadlocked", "rank_stopped", 22250),
    # The same, in a run where the API server's stats line (the last window's tokens/s) moved.
    "vllm_engine_sigstop_stats_line": ("deadlocked", "rank_stopped", 30331),
    "vllm_tp2_idle": ("idle", "waits_for_outside", None),
    "vllm_tp2_worker_sigstop": ("deadlocked", "rank_stopped", 24119),
    # the SIGKILLed worker, not its peer
    "vllm_tp2_worker_killed": ("deadlocked", "rank_died", 24119),
}


@pytest.mark.parametrize("name", sorted(VLLM))
def test_recorded_vllm_verdict(name: str) -> None:
    state, rule, suspect = VLLM[name]
    verdict = classify(load_bundle(BUNDLES / f"{name}.json"))
    assert (verdict.rule, verdict.state) == (rule, state), verdict.summary
    if suspect is not None:
        assert verdict.suspects and verdict.suspects[0].pid == suspect, verdict.summary
    if name.startswith("vllm_idle"):
        # the wording is the feature: the port named is the API server's, not a gloo port
        assert ":45603" in verdict.summary


def _without(bundle: Any, pids: set, samples: int = 0) -> Any:
    """The recording as a capture that started after ``pids`` were reaped (first
    ``samples`` samples only, when given)."""
    import msgspec

    kept = tuple(
        msgspec.structs.replace(s, processes=tuple(p for p in s.processes if p.pid not in pids))
        for s in bundle.samples
    )
    return msgspec.structs.replace(
        bundle,
        samples=kept[:samples] if samples else kept,
        processes=tuple(p for p in bundle.processes if p.pid not in pids),
    )


def test_killed_worker_zombie_gets_the_rank_the_log_names() -> None:
    """A zombie has no cmdline to read its rank from; the engine's log line names it."""
    verdict = classify(load_bundle(BUNDLES / "vllm_tp2_worker_killed.json"))
    lead = verdict.suspects[0]
    assert (lead.pid, lead.rank) == (24119, 1), verdict.suspects
    assert "VllmWorker-1 died unexpectedly" in lead.reason


@pytest.mark.parametrize("samples", [0, 2], ids=["all-samples", "peer-still-alive"])
def test_killed_worker_reaped_before_diag_looked_is_named_from_the_log(samples: int) -> None:
    """SIGKILLed TP1 reaped before the first sample: no process left to see, only the
    EngineCore's "Worker proc VllmWorker-1 died unexpectedly". While TP0 still burns CPU
    tearing down, the verdict must not say "slow - wait": rank 1 is gone for good."""
    bundle = _without(load_bundle(BUNDLES / "vllm_tp2_worker_killed.json"), {24119}, samples)
    verdict = classify(bundle)
    assert verdict.state == "deadlocked", verdict.summary
    lead = verdict.suspects[0]
    assert (lead.pid, lead.rank) == (0, 1), verdict.suspects
    assert "VllmWorker-1 died unexpectedly" in lead.reason
    if not samples:
        return
    assert verdict.rule == "log_names_dead_rank", verdict.summary
    # While its peer lives, the graph has the gone rank as a node of its own, dead.
    assert verdict.graph is not None
    assert any(
        c.startswith("rank 1: exited, gone before diag looked") for c in verdict.graph.chains
    )


def test_server_gone_before_the_last_sample_still_names_the_dead_worker() -> None:
    """vLLM shuts down within seconds of a worker's death; a capture can end with every
    process gone and the death line scrolled out of the last tail under the shutdown's
    tracebacks (CI: "exited: the target is gone (exit code 0)", no suspect). The line seen
    in an earlier sample still names rank 1."""
    import msgspec

    bundle = load_bundle(BUNDLES / "vllm_tp2_worker_killed.json")
    last = bundle.samples[-1]
    noise = tuple(f'(APIServer pid=23239) ERROR   File "x.py", line {n}' for n in range(50))
    gone = msgspec.structs.replace(
        last,
        index=last.index + 1,
        t_s=last.t_s + 1.0,
        processes=tuple(
            msgspec.structs.replace(p, status="exited", state=None, threads=())
            for p in last.processes
        ),
        logs=tuple(msgspec.structs.replace(lg, tail=noise) for lg in last.logs),
    )
    verdict = classify(msgspec.structs.replace(bundle, samples=(*bundle.samples, gone)))
    assert (verdict.rule, verdict.state) == ("target_exited", "exited"), verdict.summary
    lead = verdict.suspects[0]
    assert lead.rank == 1 and lead.pid == 24119, verdict.suspects
    assert "VllmWorker-1 died unexpectedly" in lead.reason


def test_a_server_holding_unanswered_requests_is_no_chain_end_whatever_it_logs() -> None:
    """The API server logged a stats line during the capture (tokens/s of the window before
    the engine stopped): its output moved, but its client's request did not - the chain goes
    on to the stopped EngineCore (CI once read the chain as ending at a working API server)."""
    verdict = classify(load_bundle(BUNDLES / "vllm_engine_sigstop_stats_line.json"))
    assert verdict.graph is not None
    assert any(
        c.startswith(
            "outside: clients → (request) → API server (vllm serve, pid 30272) → (unix) → "
            "EngineCore (pid 30331)"
        )
        and "stopped" in c
        for c in verdict.graph.chains
    ), verdict.graph.chains


def test_a_rank_at_a_pdb_prompt_is_named_with_its_remedy() -> None:
    verdict = classify(load_bundle(BUNDLES / "torchrun_pdb_rank.json"))
    assert (verdict.rule, verdict.state) == ("peers_wait", "deadlocked"), verdict.summary
    assert [s.rank for s in verdict.suspects] == [1]
    # the wording is the feature: the prompt named, and how to go on from it
    assert "a debugger prompt" in verdict.summary and "`c` continues" in verdict.summary


def test_native_futex_waits_inside_ray_are_no_lock_cycle() -> None:
    """Ray's driver threads `listen_error_messages` and `print_logs` block on futexes inside
    Ray's C++ (its GCS subscriber): two futexes, no cycle - the job is idle (this recording
    once read "deadlocked: a lock cycle")."""
    verdict = classify(load_bundle(BUNDLES / "ray_idle.json"))
    assert (verdict.rule, verdict.state) == ("waits_for_outside", "idle"), verdict.summary
    matched = {verdict.rule, *(m.rule for m in verdict.also_matched)}
    assert not {"lock_cycle", "lock_without_door", "blocked_on_itself"} & matched, matched


# Where the wait-for graph alone and the rules read a recording differently, and why the rules
# are right there (each a judgment the graph cannot make from who-waits-on-whom alone).
GRAPH_DISAGREES = {
    # One sample of a healthy training job, its ranks met in all_reduce (or one in its
    # forward): the graph draws the snapshot's chains (a cycle of peer waits); the verdict
    # says one snapshot cannot tell a wait that lasts from one that ends (unknown:
    # classify._sampling_caveats).
    "gloo_train_one_sample",
    "gloo_train_one_sample_forward",
    # A thread waits untimed on an Event whose setter thread died (the log's "Exception in
    # thread ..."): to the graph a port, a server's own loop or a watcher's timer beside it can
    # set it (idle); the rules read the log - its setter is gone (waits_for_dead_thread).
    "grpc_server_log_dead_loader",
    # Ranks wait in a collective for rank 2, which sleeps in `rebuild_cache`: to the graph a
    # timer can end that sleep; the rules call a rank sleeping outside its group's collective
    # a divergence (it will not come back by itself).
    "gloo_diverge_sleep",
    # Rank 1 sleeps in a 45 s back-off while ranks 0, 2 wait in all_reduce: to the graph a
    # timer ends it (idle); the rules say the group is slow - it resumes, on a clock.
    "gloo_backoff_503",
    # A pool's workers sleep a rate limit's Retry-After while their caller waits for the
    # results: to the graph a timer ends each sleep (idle); the rules say the caller's wait is
    # slow - its results come, on a clock (results_never_come).
    "pool_rate_limited",
    # ... and rank 1 retries a server that answers 503 for good: to the graph a timer ends
    # each sleep; the rules read the same retry line again and again - it never resumes.
    "gloo_retry_never_ready",
    # Flight Recorder says a rank is behind in the collectives; the graph does not read FR.
    "fr_lag_4ranks",
    # Rank 1 sits at a pdb prompt on a silent stdin: to the graph input can still come (a
    # door); the rules call the group deadlocked until someone answers it.
    "torchrun_pdb_rank",
    # Both SGLang schedulers are zombies (one SIGKILLed) and nothing waits on them any more:
    # the main process sleeps in its crash dump, the detokenizer on its socket - to the graph
    # doors that can open; the rules know a scheduler by its title and that the server that
    # lost them can never serve again.
    "sglang_real_tp2_rank_killed",
    # As gloo_diverge_sleep: rank 0 waits in a barrier for rank 1, which polls for a file
    # (with a sleep, or spinning on `exists`): to the graph the timer (or the poll) may end
    # it; the rules call a rank polling outside its group's collective a divergence.
    "explore_poll_exists_with_sleep",
    "explore_spin_on_exists",
    # Ranks poll torch's FileBaton for a lock file nobody of the job holds, sleeping between
    # checks: to the graph the timer may end it; the rules know the file's creator is gone.
    "wait_edges_stale_torch_build_lock",
    # ``run(capture_output=True)`` waits for EOF; its child is a zombie (waited on by waitpid:
    # no dead end to the graph) and the pipe's holder outside the job sleeps: the graph gives
    # no state, the rule follows the pipe edges to the holder.
    "wait_edges_communicate_background",
    # Ranks 1-2 wait to join the store of rank 0, which died before diag looked: no process
    # is left for the graph to end their chain at (it gives no state); the rules read its
    # death from its traceback and its launcher (store_host_died).
    "store_host_crashed",
    # Rank 0, the store's host, arrived in init_process_group during the capture and the three
    # ranks wait there to meet: to the graph a chain of peers that never ends; the rules read
    # the arrival across samples - the start-up advances (rendezvous_forming).
    "store_host_arrives",
    # A DataLoader worker's request to a store outside the job has had no byte of answer for
    # 2 min: to the graph a socket to a live outside process is a door that may open (idle);
    # the rules read the request's age from tcp_info - the fetch hangs (children_work).
    "dataloader_fetch_hung",
    # A parent polls on a timer and never reads the full pipe its child blocks on; a thread
    # holds a lock while it polls on a timer for the threads that need it: to the graph the
    # timer ends the wait (idle); the rules read that it woke again and again, the same
    # stack each time, and never moved the other side (timer_cannot_end).
    "child_pipe_polled",
    "lock_held_polling_uploads",
    "thread_put_holding_lock",
    # An event loop whose only wakes are its heartbeat's timer: to the graph a timer that can
    # end the wait (idle); that nothing else can wake it and each wake only logs that it
    # lives is the rules' reading of its epoll list, signals and log (wakes_only_itself).
    "asyncio_event_heartbeat",
    "thread_event_heartbeat",
    # A Manager's lock whose holder was killed: to the graph the chain ends at the parent
    # polling on a timer (idle); that no live client can release it is the rules' reading
    # (lock_behind_clients).
    "manager_lock_orphaned",
    # A thread spins on one line while the thread that was to end the spin died: to the
    # graph a process that computes (slow); that its setter is dead is the rules' reading of
    # its log (spins_for_dead_thread).
    "spin_on_dead_loader",
    # A subscriber waits in recv on a live feed outside the job: to the graph the chain ends
    # at a process whose own wait is not captured (deadlocked); that nothing is owed to the
    # reader - it asked nothing - is the rules' reading of tcp_info (waits_on_quiet_peer).
    "subscriber_quiet_feed",
    # Requests held open by a long poll: to the graph clients wait on a server whose
    # requests go unanswered (deadlocked); that each handler waits with a timeout the kernel
    # says ends soon is the rules' reading of the deadlines (requests_unanswered, idle).
    "long_poll_waiting",
    # A pool full of slow calls: to the graph clients wait on a server that does not answer
    # (deadlocked); that the pool workers its handlers wait on all sleep on timers ending
    # within 10 min is the rules' reading of the deadlines (requests_unanswered, slow).
    "pool_full_health_answers",
    # Request threads pile up on a lock whose holder waits for an event nobody sets; the
    # clients' requests reach the server's main thread, asleep on a timer: to the graph a
    # handler that sleeps (slow); the rules read the pile and its holder (requests_pile_up).
    "http_wedged_pileup",
    # A job retries a service outside it that answers 503, sleeping 1 s between tries: to
    # the graph a timer ends each sleep (idle); the rules read its log - failures only, none
    # completed - and call it slow until the service answers (output_reports_failure).
    "retry_until_answers",
    # A checkpoint save retried every 3 s on a full disk: to the graph a timer ends each sleep
    # (idle); the rules read its log - only "No space left on device" - and call it slow
    # until space is freed (output_reports_failure).
    "ckpt_save_disk_full",
    # Rank 0 retries a checkpoint save on a full disk every 3 s while ranks 1, 2 wait in a
    # barrier: to the graph a timer ends each sleep (idle); the rules read the same retry line
    # again and again - it never resumes (peers_wait: diverged).
    "gloo_ckpt_retry_full_disk",
    # A thread waits on a lock held across a wait for an event nobody sets, while a watchdog
    # logs timeouts every second: to the graph the watchdog's timer is a door (idle); the
    # rules read a log of failures only beside a thread blocked in every sample (deadlocked).
    "batch_timeouts_lock",
    # Ranks wait for a rank whose read has not returned; the job's log has a line every 12 s
    # and the capture ended before it was overdue: to the graph a chain that never ends
    # (deadlocked); the rules read the log's beat - too short to call a hang (unknown).
    "gloo_step_rhythm_short",
}


def _every_recording() -> List[Any]:
    paths = [*sorted(BUNDLES.glob("*.json")), *sorted((REPO / "tests/golden/bundles").glob("*"))]
    return [pytest.param(p, id=p.stem) for p in paths if p.suffix == ".json"]


@pytest.mark.parametrize("path", _every_recording())
def test_the_wait_for_graph_gives_the_same_state_as_the_rules(path: Path) -> None:
    """The graph (who waits on whom, each chain to its end) and the rule table reach the same
    state on every recorded capture, real servers included - the chains are the verdict's
    why, not a second opinion that contradicts it."""
    from diag.verdict.classify import graph_state

    verdict = classify(load_bundle(path))
    implied = graph_state(verdict.graph)
    if implied is None:
        assert (verdict.state == "exited") != (path.stem in GRAPH_DISAGREES), verdict.summary
        return
    agrees = verdict.state in implied
    assert agrees != (path.stem in GRAPH_DISAGREES), (
        f"{verdict.state} vs the graph's {implied}: {verdict.graph.chains if verdict.graph else ()}"
    )


def test_the_scenarios_name_rules_of_the_table() -> None:
    """A scenario's accepted deciding rules (``Scenario.rules``) are ids the table knows: a
    rule renamed or removed shows here, not only in the slow scenario suite."""
    from diag.vocab import PRE_RULE_IDS, RULE_IDS

    known = {*RULE_IDS, *PRE_RULE_IDS}
    unknown = {s.name: s.rules for s in run_scenarios.SCENARIOS if set(s.rules) - known}
    assert not unknown, unknown
    assert sum(1 for s in run_scenarios.SCENARIOS if s.rules) >= 16
