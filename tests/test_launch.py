"""Launch mode on its own: a real child in its own process group, teed, signalled, reaped."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest
from conftest import DIAG, PROGRAMS

from diag.errors import EXIT_NO_TARGET, DiagError
from diag.watch.interrupts import SignalForwarding, StopRequest
from diag.watch.launch import LaunchedCommand, describe_exit, launch

CHILD = str(PROGRAMS / "launch_child.py")


class Terminal(io.BytesIO):
    """Stands in for diag's stdout/stderr so the test can read what the user would have seen."""


def wait_for_text(path: Path, text: str, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        content = path.read_text(errors="replace") if path.exists() else ""
        if text in content:
            return content
        time.sleep(0.05)
    pytest.fail(f"{text!r} never appeared in {path}: {content[-2000:]!r}")


def run_to_exit(cmd: LaunchedCommand) -> int:
    code = cmd.wait(60)
    assert code is not None
    cmd.drain()
    cmd.close()
    return code


def launch_ready(argv: List[str], tmp_path: Path) -> LaunchedCommand:
    """Launch ``argv`` (terminal output swallowed) and wait for the READY line in its log."""
    cmd = launch(argv, tmp_path / "run.log", terminal_out=Terminal(), terminal_err=Terminal())
    try:
        wait_for_text(cmd.log_path, "READY")
    except BaseException:
        cmd.forward(signal.SIGKILL)
        raise
    return cmd


def test_exit_code_tee_and_scrubbed_log(tmp_path: Path) -> None:
    out, err = Terminal(), Terminal()
    log = tmp_path / "run.log"
    env = dict(os.environ, LAUNCH_SECRET="hunter2-very-secret")
    cmd = launch(
        [sys.executable, CHILD, "exit", "3"],
        log,
        scrub=lambda text: text.replace("hunter2-very-secret", "[REDACTED]"),
        terminal_out=out,
        terminal_err=err,
        env=env,
    )
    assert run_to_exit(cmd) == 3
    assert cmd.exit_code == 3
    # The terminal gets the child's own output unchanged, each stream on its own.
    assert b"hello from stdout" in out.getvalue()
    assert b"hunter2-very-secret" in out.getvalue()
    assert b"hello from stderr" in err.getvalue()
    assert b"hello from stderr" not in out.getvalue()
    # The log beside the report holds both streams, scrubbed, and the unterminated last line.
    text = log.read_text()
    assert "hello from stdout" in text and "hello from stderr" in text
    assert "hunter2-very-secret" not in text
    assert "token=[REDACTED]" in text
    assert text.endswith("last words without newline\n")


def test_child_runs_in_its_own_process_group(tmp_path: Path) -> None:
    cmd = launch_ready([sys.executable, CHILD, "signals"], tmp_path)
    try:
        assert os.getpgid(cmd.pid) == cmd.pid
        assert os.getpgid(cmd.pid) != os.getpgid(0)
    finally:
        cmd.forward(signal.SIGKILL)
        run_to_exit(cmd)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_forward_reaches_the_whole_group(tmp_path: Path, signum: int) -> None:
    cmd = launch_ready([sys.executable, CHILD, "signals"], tmp_path)
    cmd.forward(signum)
    assert run_to_exit(cmd) == 0  # the child's own handler ran and exited cleanly
    text = cmd.log_path.read_text()
    name = signal.Signals(signum).name
    assert f"child got {name}" in text
    assert f"grandchild got {name}" in text


def test_signal_forwarding_handler_forwards_then_requests_stop(tmp_path: Path) -> None:
    cmd = launch_ready([sys.executable, CHILD, "signals"], tmp_path)
    stop = StopRequest()
    with SignalForwarding(stop, cmd):
        os.kill(os.getpid(), signal.SIGINT)  # what a terminal Ctrl-C does to diag
        assert stop.wait(10)
    assert stop.signum == signal.SIGINT
    assert run_to_exit(cmd) == 0
    assert "child got SIGINT" in cmd.log_path.read_text()
    # The previous handler is back: Python's default raises KeyboardInterrupt again.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_killed_child_reports_the_signal(tmp_path: Path) -> None:
    sleeper = "import time; print('READY', flush=True); time.sleep(60)"
    cmd = launch_ready([sys.executable, "-c", sleeper], tmp_path)
    cmd.forward(signal.SIGKILL)
    code = run_to_exit(cmd)
    assert code == -signal.SIGKILL
    assert describe_exit(code) == "killed by SIGKILL"
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(None) == "still running"


def test_missing_command_is_a_no_target_error(tmp_path: Path) -> None:
    with pytest.raises(DiagError) as info:
        launch(["/nonexistent/definitely-not-a-command"], tmp_path / "run.log")
    assert info.value.exit_code == EXIT_NO_TARGET
    assert "definitely-not-a-command" in info.value.message


def test_launched_secrets_reach_no_output_file(tmp_path: Path) -> None:
    """A secret in the launched command's env and argv (which it also prints) is scrubbed from
    every file diag writes: report, Markdown, bundle, journal and the teed log."""
    secret_env = "envsecret-0123456789abcdef"
    secret_arg = "argsecret-fedcba9876543210"
    env = dict(os.environ, LAUNCH_SECRET=secret_env)
    argv = [sys.executable, CHILD, "exit", "3", "--api-key", secret_arg]
    out = tmp_path / "sec.html"
    result = subprocess.run(
        [*DIAG, "watch", "--interval", "0.5", "-o", str(out), "--", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert secret_env in result.stdout  # the terminal shows the command's own output as is
    written = sorted(p.name for p in tmp_path.iterdir())
    assert {"sec.html", "sec.md", "sec.json", "sec.jsonl", "sec.log"} <= set(written), written
    for path in tmp_path.iterdir():
        data = path.read_bytes()
        assert secret_env.encode() not in data, path.name
        assert secret_arg.encode() not in data, path.name
    assert secret_env not in result.stderr and secret_arg not in result.stderr
