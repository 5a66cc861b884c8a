"""Output is progress only when it reports progress; a request pile-up is a wedge - real
programs (samples/scenarios/), each with its contrast:

- a threaded HTTP server whose handlers wedge on a lock held across a wait for an event its
  dead warm-up thread was to set, while an in-job client logs timeouts: deadlocked, the pile
  and its holder named, though its health endpoint answers 200 (contrast: a server where some
  requests fail and the others complete - progressing, with the failure rate);
- a job whose only output is timeouts while a thread blocks on a lock in every sample:
  deadlocked;
- a job retrying a service outside it that answers 503 (a local HTTP server beside it): slow,
  never deadlocked - and once the service answers during the capture, not deadlocked either.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from conftest import SCENARIOS, Started, run_diag, start_ready

pytestmark = pytest.mark.slow


def _capture(started: Started, tmp_path: Path) -> Dict[str, Any]:
    out = tmp_path / "bundle.json"
    try:
        done = run_diag(["capture", "--pid", str(started.pid), "-o", str(out)], timeout_s=300)
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    verdict: Dict[str, Any] = json.loads(out.read_text())["verdict"]
    return verdict


def _start(name: str, env: Optional[Dict[str, str]] = None) -> Started:
    return start_ready([sys.executable, str(SCENARIOS / f"{name}.py")], timeout_s=120, env=env)


def test_wedged_server_is_deadlocked_with_its_pile_and_holder_named(tmp_path: Path) -> None:
    started = _start("http_wedged_pileup")
    port = next(int(line.split()[1]) for line in started.lines if line.startswith("PORT "))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as resp:
        assert resp.status == 200  # its health endpoint answers: no help
    verdict = _capture(started, tmp_path)
    summary = verdict["summary"]
    assert verdict["state"] == "deadlocked", summary
    assert verdict["rule"] == "requests_pile_up", summary
    assert f"request threads of pid {started.pid} queue on a lock in `Handler.do_GET`" in summary
    assert "waiting in `Event.wait` for an event that no live thread sets" in summary
    assert "thread `warmup` died" in summary and "could not load the tokenizer" in summary
    (suspect,) = verdict["suspects"]
    assert suspect["pid"] == started.pid
    assert "holds the lock in `Handler.do_GET`" in suspect["reason"]
    assert suspect["chain"].endswith("thread `warmup`: dead"), suspect["chain"]
    # its /health answered 200 all along (bytes on its port, access lines in its log): no
    # rule that reads motion decided
    assert verdict["rule"] not in ("answers_requests", "output_moves", "cpu_held_back")


def test_server_with_some_failures_progresses_with_its_failure_rate(tmp_path: Path) -> None:
    verdict = _capture(_start("http_some_fail"), tmp_path)
    summary = verdict["summary"]
    assert verdict["state"] == "progressing", summary
    assert verdict["rule"] == "output_moves", summary
    assert "outcomes failed in" in summary and "timeout" in summary, summary
    assert not verdict.get("suspects"), summary


def test_job_retrying_a_failing_outside_service_is_slow_not_deadlocked(tmp_path: Path) -> None:
    verdict = _capture(_start("retry_until_answers"), tmp_path)
    summary = verdict["summary"]
    assert verdict["state"] == "slow", summary
    assert verdict["rule"] == "output_reports_failure", summary
    assert "its only moving output is failure" in summary and "HTTP error" in summary, summary
    assert "none completed" in summary and "nothing of it is blocked" in summary, summary


def test_job_whose_outside_service_answers_during_the_capture_is_not_deadlocked(
    tmp_path: Path,
) -> None:
    """The service answers 4 s after it starts: the capture sees the failures end and the job
    go on ("config loaded", steps)."""
    started = _start("retry_until_answers", env={"DIAG_SERVICE_UNAVAILABLE_S": "4"})
    verdict = _capture(started, tmp_path)
    assert verdict["state"] in ("progressing", "slow"), verdict["summary"]


def test_failures_only_beside_a_thread_blocked_on_a_lock_is_deadlocked(tmp_path: Path) -> None:
    """No pile (one waiter): the log's timeouts and a thread on a lock in every sample."""
    started = _start("batch_timeouts_lock")
    verdict = _capture(started, tmp_path)
    summary = verdict["summary"]
    assert verdict["state"] == "deadlocked", summary
    assert verdict["rule"] == "output_reports_failure", summary
    assert "its only moving output is failure" in summary and "timeouts), none" in summary
    assert f"pid {started.pid}: 1 thread in `main`" in summary, summary
    assert [s["pid"] for s in verdict["suspects"]] == [started.pid]


def test_a_full_pool_wedged_on_one_lock_is_deadlocked(tmp_path: Path) -> None:
    """The pile cannot grow past a fixed pool of workers: the same 3 on the lock in every
    sample is still the wedge, its holder a pool worker."""
    started = _start("pool_server_wedged")
    verdict = _capture(started, tmp_path)
    summary = verdict["summary"]
    assert verdict["state"] == "deadlocked", summary
    assert verdict["rule"] == "requests_pile_up", summary
    assert "3 request threads" in summary and "its pool is full" in summary, summary
    assert "(`worker_" in summary and "thread `refresher` died" in summary, summary
