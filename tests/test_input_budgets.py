"""Total budgets on what ``diag report`` and ``diag merge`` take in (issue #25): a crafted bundle
of 200,000 processes made ``report`` use 1.9 GiB and ``merge`` 4 GiB over two minutes. Past the
documented caps each is refused at once with a one-line error naming the cap, not rendered."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from conftest import run_diag

from bench.synth import make_bundle
from diag.bundle import io
from diag.bundle.io import load_bundle, write_bundle
from diag.errors import EXIT_BAD_BUNDLE, DiagError
from diag.model import ProcessInfo


def _with_processes(n: int) -> object:
    bundle = make_bundle(ranks=1, threads=1, samples=1)
    extra = tuple(ProcessInfo(pid=100_000 + i, name="w") for i in range(n))
    return msgspec.structs.replace(bundle, processes=(*bundle.processes, *extra))


def test_a_bundle_past_the_process_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(io, "MAX_PROCESSES", 50)
    path = tmp_path / "big.json"
    write_bundle(_with_processes(60), path)  # type: ignore[arg-type]
    with pytest.raises(DiagError) as info:
        load_bundle(path)
    assert info.value.exit_code == EXIT_BAD_BUNDLE
    assert "more than the 50 processes" in info.value.one_line()
    write_bundle(_with_processes(10), path)  # type: ignore[arg-type]
    load_bundle(path)


def test_a_bundle_past_the_thread_record_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(io, "MAX_THREAD_RECORDS", 10)
    path = tmp_path / "threads.json"
    write_bundle(make_bundle(ranks=2, threads=8, samples=2), path)
    with pytest.raises(DiagError) as info:
        load_bundle(path)
    assert "thread records" in info.value.one_line()


def test_merge_refuses_inputs_that_together_pass_the_cap(tmp_path: Path) -> None:
    """Real CLI, real cap: 3 bundles of 40,000 processes each (each alone within the cap)."""
    paths = []
    for host in range(3):
        path = tmp_path / f"h{host}.json"
        bundle = _with_processes(40_000)
        host_info = msgspec.structs.replace(bundle.host, hostname=f"node-{host}")  # type: ignore[attr-defined]
        write_bundle(msgspec.structs.replace(bundle, host=host_info), path)  # type: ignore[type-var]
        paths.append(str(path))
    result = run_diag(["merge", *paths, "-o", str(tmp_path / "m")], timeout_s=300)
    assert result.returncode == EXIT_BAD_BUNDLE, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "100,000 processes" in lines[0], lines
    assert not (tmp_path / "m.html").exists()


def test_five_processes_of_30000_variables_cost_seconds_not_minutes(tmp_path: Path) -> None:
    """Every value of a secret-looking name is learned by the redactor, once per process and
    sample: the spellings of a value are computed once (a capture took 156-185 s before)."""
    import os
    import subprocess
    import sys
    import time

    env = dict(os.environ)
    env.update({f"MY_TOKEN_{i}": f"s3cr3t{i:05d}q" + "x" * 20 for i in range(30_000)})
    # One process and its 4 children, all with that environment: the job diag captures.
    parent = (
        "import subprocess, sys, time\n"
        "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])"
        " for _ in range(4)]\n"
        "time.sleep(120)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", parent], env=env, start_new_session=True)]
    time.sleep(1.0)  # the children started
    try:
        started = time.monotonic()
        result = run_diag(
            ["capture", "--pid", str(procs[0].pid), "--count", "1", "-o", str(tmp_path / "c")],
            timeout_s=300,
        )
        took = time.monotonic() - started
    finally:
        for proc in procs:
            os.killpg(proc.pid, 9)  # the group this test started: the parent and its children
            proc.wait()
    assert result.returncode == 0, result.stderr
    assert took < 60, took
    bundle = (tmp_path / "c.json").read_text()
    assert bundle.count('"pid":') >= 5 and "s3cr3t00042q" not in bundle
