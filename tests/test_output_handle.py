"""Writes by handle, not by path (issue #25): the whole output path is checked, the directory
is opened once, and every file is created relative to that handle - so a directory swapped for
a symlink mid-watch, or a symlink another user owns on the way, never makes root write
elsewhere. Real directories, real modes, a real other user (``nobody``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import DIAG, PROGRAMS, run_diag

from diag.bundle.outdir import OutputDir
from diag.errors import EXIT_OUTPUT, DiagError

ROOT = os.geteuid() == 0
NOBODY = 65534
SLEEPER = [sys.executable, str(PROGRAMS / "exit_soon.py"), "60"]


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_world_writable_dir_above_the_output_is_refused(spawn: Any, tmp_path: Path) -> None:
    job = spawn(SLEEPER)
    sub = tmp_path / "ww" / "sub"
    sub.mkdir(parents=True)
    (tmp_path / "ww").chmod(0o777)  # anyone could swap ``sub``: not sticky
    for verb in ("watch", "capture"):
        result = run_diag([verb, "--pid", str(job.pid), "--count", "1", "-o", str(sub / "run")])
        assert result.returncode == EXIT_OUTPUT, result.stderr
        line = _one_line(result.stderr)
        assert f"{tmp_path}/ww is world-writable without the sticky bit" in line, line
    assert list(sub.iterdir()) == []


def test_a_symlink_owned_by_another_user_on_the_way_is_refused(spawn: Any, tmp_path: Path) -> None:
    if not ROOT:
        pytest.skip("lchown to another uid needs root")
    job = spawn(SLEEPER)
    pub, target = tmp_path / "pub", tmp_path / "victim-dir"
    pub.mkdir()
    pub.chmod(0o1777)  # sticky, like /tmp: fine in itself
    target.mkdir()
    (pub / "reports").symlink_to(target)
    os.lchown(pub / "reports", NOBODY, NOBODY)
    result = run_diag(
        ["capture", "--pid", str(job.pid), "--count", "1", "-o", f"{pub}/reports/cap"]
    )
    assert result.returncode == EXIT_OUTPUT, result.stderr
    assert f"{pub}/reports is a symlink owned by uid {NOBODY}" in _one_line(result.stderr)
    assert list(target.iterdir()) == []
    os.lchown(pub / "reports", 0, 0)  # the same link owned by root is followed
    OutputDir.open(pub / "reports").close()


def test_a_directory_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    if not ROOT:
        pytest.skip("chown to another uid needs root")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(DiagError) as info:
        OutputDir.open(theirs)
    assert info.value.exit_code == EXIT_OUTPUT
    assert f"{theirs} is owned by uid {NOBODY}" in info.value.one_line()


def test_a_directory_swapped_for_a_symlink_mid_watch_gets_nothing(
    spawn: Any, tmp_path: Path
) -> None:
    job = spawn(SLEEPER)
    base, elsewhere = tmp_path / "d", tmp_path / "elsewhere"
    (base / "sub").mkdir(parents=True)
    elsewhere.mkdir()
    args = ["watch", "--pid", str(job.pid), "--interval", "0.2", "--duration", "3"]
    diag = subprocess.Popen(
        [*DIAG, *args, "-o", str(base / "sub" / "run")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (base / "sub" / "run.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (base / "sub").rename(base / "old")  # what an attacker above would do, done by root here
    (base / "sub").symlink_to(elsewhere)
    _out, stderr = diag.communicate(timeout=120)
    assert diag.returncode == 0, stderr
    assert list(elsewhere.iterdir()) == []  # nothing followed the new link
    kept = {p.name for p in (base / "old").iterdir()}
    assert {"run.jsonl", "run.json", "run.html", "run.md"} <= kept, kept
    assert (base / "old" / "run.jsonl").read_text().rstrip().endswith("}")


def test_temporary_names_stay_within_name_max(tmp_path: Path) -> None:
    name = "r" * 250
    with OutputDir.open(tmp_path) as directory:
        directory.write_atomic(name, b"x")
    assert (tmp_path / name).read_bytes() == b"x"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_report_beside_a_bundle_in_a_directory_anyone_can_change_is_refused(
    tmp_path: Path,
) -> None:
    """``diag report`` writes beside a bundle someone handed over: that directory is checked
    as ``-o`` is, and ``-o`` into a safe one is the way out the error names."""
    bundle = next(Path(__file__).parent.joinpath("golden", "bundles").glob("*.json"))
    ww = tmp_path / "ww"
    ww.mkdir()
    ww.chmod(0o777)  # not sticky: anyone could swap what diag writes
    handed = ww / "handed.json"
    handed.write_bytes(bundle.read_bytes())
    result = run_diag(["report", str(handed)])
    assert result.returncode == EXIT_OUTPUT, result.stderr
    line = _one_line(result.stderr)
    assert f"{ww} is world-writable without the sticky bit" in line and "-o" in line, line
    assert sorted(p.name for p in ww.iterdir()) == ["handed.json"]
    safe = tmp_path / "safe"
    safe.mkdir()
    result = run_diag(["report", str(handed), "-o", str(safe / "r.html")])
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in safe.iterdir()) == ["r.html", "r.md"]
