"""A rank in a timed back-off while its peers wait in a collective resumes by itself: slow,
with its wake time, not "diverged, kill the job" (issue #33's deadlines, issue #34's first
miss). Time decides: the recorded capture of a real back-off (gloo_backoff_503: HTTP 503, a
45 s Retry-After sleep) reads slow; the same capture with a sleep budget past any sane
back-off, or with the same retry line logged again and again, reads deadlocked; the contrast
recordings (gloo_diverge_sleep's `while True: time.sleep(3600)`, gloo_retry_never_ready's
retry loop on a server that never answers) keep their verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import msgspec
from conftest import REPO

from diag.bundle.io import load_bundle
from diag.model import Bundle, LogSample, ProcessSample, Sample, ThreadSample
from diag.verdict.backoff import is_retry_line, repeats
from diag.verdict.classify import classify

BUNDLES = REPO / "samples" / "bundles"
SLEEPER_RANK = 1


def _stuck(bundle: Bundle) -> bool:
    """No back-off: ``peer_backs_off`` does not match and ``peers_wait`` (deadlocked) does -
    deciding, or overruled only by a row before both (the host's CPU load when recorded)."""
    verdict = classify(bundle)
    matched = {verdict.rule: verdict.state, **{m.rule: m.state for m in verdict.also_matched}}
    return "peer_backs_off" not in matched and matched.get("peers_wait") == "deadlocked"


def _load(name: str) -> Bundle:
    return load_bundle(Path(BUNDLES / f"{name}.json"))


def _sleeper_pid(bundle: Bundle) -> int:
    verdict = classify(bundle)
    return next(s.pid for s in verdict.suspects if s.rank == SLEEPER_RANK)


def _edit_main(bundle: Bundle, pid: int, edit: Callable[[ThreadSample], ThreadSample]) -> Bundle:
    def proc(ps: ProcessSample) -> ProcessSample:
        if ps.pid != pid:
            return ps
        threads = tuple(edit(t) if t.tid == pid else t for t in ps.threads)
        return msgspec.structs.replace(ps, threads=threads)

    samples = [
        msgspec.structs.replace(s, processes=tuple(proc(ps) for ps in s.processes))
        for s in bundle.samples
    ]
    return msgspec.structs.replace(bundle, samples=samples)


def _edit_logs(bundle: Bundle, edit: Callable[[LogSample], LogSample]) -> Bundle:
    def sample(s: Sample) -> Sample:
        logs = tuple(edit(log) for log in s.logs) if s.logs else s.logs
        return msgspec.structs.replace(s, logs=logs)

    return msgspec.structs.replace(bundle, samples=[sample(s) for s in bundle.samples])


def test_a_rank_in_a_timed_back_off_is_slow_with_its_wake_time() -> None:
    verdict = classify(_load("gloo_backoff_503"))
    assert verdict.state == "slow", verdict.summary
    assert verdict.rule == "peer_backs_off"
    assert "wakes by itself in ~" in verdict.summary
    assert "retrying in 45.0 s" in verdict.summary  # its log confirms it, quoted
    assert "diverged" not in verdict.summary.replace("not a diverged rank", "")
    assert [s.rank for s in verdict.suspects] == [SLEEPER_RANK]


def test_a_sleep_longer_than_any_back_off_is_a_diverged_rank() -> None:
    bundle = _load("gloo_backoff_503")
    pid = _sleeper_pid(bundle)
    parked = _edit_main(
        bundle,
        pid,
        lambda t: msgspec.structs.replace(t, timeout_s=3600.0, wakes_in_s=3590.0),
    )
    assert _stuck(parked)


def test_a_back_off_without_a_readable_timeout_is_not_assumed_to_end() -> None:
    """Bundles recorded before the probe (or without the right to read /proc/P/mem) have no
    deadline: the verdict stays what it was."""
    bundle = _load("gloo_backoff_503")
    pid = _sleeper_pid(bundle)
    blind = _edit_main(
        bundle, pid, lambda t: msgspec.structs.replace(t, timeout_s=None, wakes_in_s=None)
    )
    assert _stuck(blind)


def test_the_same_retry_logged_again_and_again_is_stuck_not_slow() -> None:
    bundle = _load("gloo_backoff_503")
    same = "2026-12-06 04:08:15,101 WARNING HTTP 503 from http://h/shard/3; retrying in 45.0 s"
    looping = _edit_logs(bundle, lambda log: msgspec.structs.replace(log, tail=(same,) * 6))
    assert _stuck(looping)


def test_the_contrasts_keep_their_verdict() -> None:
    for name in ("gloo_diverge_sleep", "gloo_retry_never_ready"):
        verdict = classify(_load(name))
        assert verdict.state == "deadlocked" and verdict.rule == "peers_wait", (name, verdict)


def test_a_retry_that_wakes_every_second_is_a_poll_even_with_a_quiet_log() -> None:
    """gloo_retry_never_ready with no log: the sleep itself, slept again and again with the
    same 1 s budget across the capture, says the retry does not end."""
    bundle = _load("gloo_retry_never_ready")
    silent = [msgspec.structs.replace(s, logs=()) for s in bundle.samples]
    assert _stuck(msgspec.structs.replace(bundle, samples=silent))


def test_retry_lines_generic_words_and_pack_spellings() -> None:
    assert is_retry_line("WARNING HTTP 503 from http://h/x; retrying in 2.0 s (attempt 2/8)")
    assert is_retry_line("Backing off fetch(...) for 4.2s (requests.exceptions.HTTPError)")
    assert is_retry_line("'(ReadTimeoutError(...))' thrown while requesting HEAD https://hf.co/x")
    assert is_retry_line("[c10d] The client socket has failed to connect to [h]:29500")
    assert not is_retry_line("step 300 loss 1.25")
    grows = [
        "04:07:54,743 WARNING HTTP 503; retrying in 0.5 s (attempt 1/8)",
        "04:07:55,245 WARNING HTTP 503; retrying in 1.0 s (attempt 2/8)",
        "04:07:56,246 WARNING HTTP 503; retrying in 2.0 s (attempt 3/8)",
    ]
    assert repeats(grows) == 1  # an exponential back-off: each delay differs
    same = [
        f"2026-12-06 04:08:{n:02d},101 WARNING retrying in 1.0 s (attempt {n})" for n in range(9)
    ]
    assert repeats(same) == 9
