"""What moving output says (diag/verdict/output_kinds.py): completions are progress;
failures, timeouts, cancellations, retries, refused connections, failed health checks, 4xx/5xx
access lines, tracebacks and a framework's own stall words are evidence of a stall."""

from __future__ import annotations

import pytest

from diag.verdict.output_kinds import line_kind, tally
from diag.verdict.rules.words_output import failure_rate


@pytest.mark.parametrize(
    ("line", "kind", "failure"),
    [
        ('INFO:     127.0.0.1:5000 - "GET /v1/completions HTTP/1.1" 200 OK', "completion", None),
        ('127.0.0.1 - - [06/Dec/2026] "POST /retry HTTP/1.1" 201 2 "-"', "completion", None),
        ('INFO:     127.0.0.1:5000 - "GET /v1 HTTP/1.1" 503 Service Unavailable', "failure",
         "HTTP error"),
        ("GET /app 504 30012.1ms", "failure", "HTTP error"),
        ("request 12 FAILED after 10.0 s: timed out", "failure", "timeout"),
        ("request 12 cancelled: client disconnected", "failure", "cancellation"),
        ("attempt 3: [Errno 111] Connection refused; retrying in 5 s", "failure",
         "refused connection"),
        ("health check failed for replica abc", "failure", "framework stall"),
        ("liveness: health check failing (3 in a row)", "failure", "failed health check"),
        ("attempt 7 failed: HTTP Error 503: Service Unavailable", "failure", "HTTP error"),
        ("backing off 4.0 s before the next try", "failure", "retry"),
        ("RuntimeError: CUDA error: an illegal memory access", "failure", "exception"),
        # a framework's own words (its pack): Ray Serve, gunicorn, uvicorn
        ("Client for request 9c1 disconnected, cancelling request.", "failure", "framework stall"),
        ("[2026-12-06 04:00:00 +0000] [7] [CRITICAL] WORKER TIMEOUT (pid:42)", "failure",
         "framework stall"),
        ("ERROR:    Exception in ASGI application", "failure", "framework stall"),
        # completions
        ("step 120 loss 1.93", "completion", None),
        ("request 4 completed in 0.12 s", "completion", None),
        ("generated 512 tokens", "completion", None),
        ("Loading checkpoint shards", "other", None),
    ],
)  # fmt: skip
def test_line_kinds(line: str, kind: str, failure: object) -> None:
    assert line_kind(line) == (kind, failure)


def test_a_traceback_is_one_failure() -> None:
    lines = [
        "Exception in thread warmup:",
        "Traceback (most recent call last):",
        '  File "/srv/app.py", line 20, in warm_up',
        "    raise RuntimeError('no tokenizer')",
        "RuntimeError: no tokenizer",
    ]
    t = tally(lines)
    assert (t.failures, t.completions, t.others) == (1, 0, 0)
    assert t.failing_only


def test_failures_only_beside_nothing_else() -> None:
    t = tally(["request 1 FAILED: timed out", "request 1 cancelled", "request 2 FAILED: timed out"])
    assert t.failing_only
    assert dict(t.kinds) == {"timeout": 2, "cancellation": 1}
    assert failure_rate(t, 6.0) == "3 failures in 6 s (2 timeouts, 1 cancellation), none completed"
    assert t.last_failure == "request 2 FAILED: timed out"


def test_failures_beside_completions_are_a_rate_not_a_stall() -> None:
    t = tally(["request 1 ok", "request 2 FAILED: timed out", "request 3 ok", "request 4 ok"])
    assert not t.failing_only
    assert failure_rate(t, 4.0) == "1 of 4 outcomes failed in 4 s (25 %: 1 timeout)"


def test_a_line_that_reports_neither_keeps_the_log_out_of_failing_only() -> None:
    assert not tally(["request 1 FAILED: timed out", "reloading model weights"]).failing_only


def test_a_health_check_answered_is_neither_progress_nor_failure() -> None:
    """A wedged server answers /health all along: its access lines count neither way, so a
    log of failures and health checks is failures only."""
    health = 'INFO:     127.0.0.1:50312 - "GET /health HTTP/1.1" 200 OK'
    assert line_kind(health) == ("probe", None)
    assert line_kind("GET /metrics 200 1.2ms") == ("probe", None)
    assert line_kind('"GET /v1/models HTTP/1.1" 200') == ("completion", None)
    assert tally([health, "request 3 FAILED after 10.0 s: timed out", health]).failing_only
    assert not tally([health, health]).failing_only  # no failure: not a stall either


def test_a_native_backtrace_is_part_of_its_failure() -> None:
    """c10's backtrace lines (the torch pack's ``backtrace_lines``) after a failure, or cut off
    from their head at the top of a tail, are that failure's - not lines of other news."""
    lines = [
        "frame #33: __libc_start_main + 0x85 (0x7f39ddc45305 in /lib/x86_64-linux-gnu/libc.so.6)",
        "[W1206 08:10:21.594 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate to "
        "host 127.0.0.1:29517 - retrying (try=2, timeout=1800000ms, delay=1271ms): Ping failed",
        "Exception raised from ping at torch/csrc/distributed/c10d/TCPStore.cpp:427 (most "
        "recent call first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f in libc10.so)",
        "frame #3: <unknown function> + 0x1630503 (0x7f39c8430503 in libtorch_cpu.so)",
        "<omitting python frames>",
        "frame #12: <unknown function> + 0x3d07bb (0x7f39dbdd07bb in libtorch_python.so)",
    ]
    t = tally(lines)
    assert t.failing_only, t
