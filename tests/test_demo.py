"""``diag demo``: every built-in job gives the verdict ``--list`` promises, and none outlives it.

The demos are real process trees (a launcher, ranks exec'd with RANK in their environment,
multiprocessing's resource tracker) captured through the real CLI, as a new user runs them.
Each run carries a unique token in its environment; afterwards no live process may hold it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List

import pytest
from conftest import DIAG, run_diag

from diag.demo.runner import DEFAULT_DEMO, DEMOS, prepare_out_dir
from diag.errors import EXIT_OUTPUT, EXIT_USAGE, DiagError

# The suspect diag must name for each demo (None: no rank; the verdict names no suspect rank).
SUSPECT_RANK = {"load": 0, "diverged": 3, "dead-rank": 2, "stopped-rank": 1}
TOKEN_ENV = "DIAG_DEMO_TEST_TOKEN"


def _processes_with(token: str) -> List[int]:
    """Live PIDs whose environment carries ``token`` (zombies have no readable environ)."""
    found = []
    needle = f"{TOKEN_ENV}={token}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _token_env() -> Dict[str, str]:
    return dict(os.environ, **{TOKEN_ENV: uuid.uuid4().hex})


def test_list_names_every_demo_and_its_verdict() -> None:
    done = run_diag(["demo", "--list"])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(DEMOS)
    for line, demo in zip(lines, DEMOS.values()):
        name, expect = line.split()[:2]
        assert (name, expect) == (demo.name, demo.expect)
    assert [line for line in lines if line.endswith("(default)")] == [
        line for line in lines if line.startswith(DEFAULT_DEMO + " ")
    ]


def test_unknown_demo_is_a_usage_error(tmp_path: Path) -> None:
    done = run_diag(["demo", "nope", "--out-dir", str(tmp_path / "d")])
    assert done.returncode == EXIT_USAGE
    assert "diag demo --list" in done.stderr
    assert not (tmp_path / "d").exists()  # checked before anything is created


def test_out_dir_is_private_and_unwritable_is_reported(tmp_path: Path) -> None:
    made = prepare_out_dir(tmp_path / "a" / "b")
    assert made.stat().st_mode & 0o777 == 0o700
    (tmp_path / "file").write_text("")
    with pytest.raises(DiagError) as info:
        prepare_out_dir(tmp_path / "file" / "sub")
    assert info.value.exit_code == EXIT_OUTPUT and "--out-dir" in info.value.remedy


@pytest.mark.slow
@pytest.mark.parametrize("name", list(DEMOS))
def test_demo_gives_its_documented_verdict(name: str, tmp_path: Path) -> None:
    env = _token_env()
    started = time.monotonic()
    done = run_diag(["demo", name, "--out-dir", str(tmp_path)], timeout_s=90, env=env)
    took_s = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    expect = DEMOS[name].expect
    verdict_line = done.stdout.strip().splitlines()[-1]
    assert verdict_line.startswith(f"verdict: {expect}"), done.stdout + done.stderr
    for ext in (".json", ".html", ".md"):
        assert (tmp_path / f"{name}{ext}").is_file()
    bundle: Dict[str, Any] = json.loads((tmp_path / f"{name}.json").read_text())
    verdict = bundle["verdict"]
    assert verdict["state"] == expect, verdict["summary"]
    if name in SUSPECT_RANK:
        ranks = [s.get("rank") for s in verdict.get("suspects", [])]
        assert SUSPECT_RANK[name] in ranks, verdict["summary"]
    assert not (tmp_path / f".{name}-work").exists()  # the job's scratch files are gone
    assert _processes_with(env[TOKEN_ENV]) == []  # the job did not outlive the demo
    assert took_s < 45, f"demo {name} took {took_s:.0f} s"


@pytest.mark.slow
def test_default_demo_names_rank_0_and_the_barrier(tmp_path: Path) -> None:
    done = run_diag(["demo", "--out-dir", str(tmp_path)], timeout_s=90)
    assert done.returncode == 0, done.stderr
    verdict_line = done.stdout.strip().splitlines()[-1]
    assert verdict_line.startswith("verdict: slow"), verdict_line
    assert "rank 0" in verdict_line and "dequantize_int4" in verdict_line
    assert "`barrier`" in verdict_line
    for ext in (".json", ".html", ".md"):
        assert f"wrote {tmp_path / DEFAULT_DEMO}{ext}" in done.stdout


@pytest.mark.slow
def test_watch_demo_prints_status_lines(tmp_path: Path) -> None:
    env = _token_env()
    done = run_diag(["demo", "--watch", "load", "--out-dir", str(tmp_path)], timeout_s=90, env=env)
    assert done.returncode == 0, done.stderr
    status = [line for line in done.stderr.splitlines() if " #" in line and "slow" in line]
    assert len(status) >= 5, done.stderr
    assert "verdict: slow" in done.stderr
    assert (tmp_path / "load.jsonl").is_file() and (tmp_path / "load.html").is_file()
    assert _processes_with(env[TOKEN_ENV]) == []


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_demo_kills_its_job(signum: int, tmp_path: Path) -> None:
    env = _token_env()
    proc = subprocess.Popen(
        [*DIAG, "demo", "stopped-rank", "--out-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    try:
        for line in proc.stderr:
            if "diag capture --pid" in line:  # the job is ready and sampling has begun
                break
        assert _processes_with(env[TOKEN_ENV]), "the demo job should be running now"
        proc.send_signal(signum)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _processes_with(env[TOKEN_ENV]) == []
