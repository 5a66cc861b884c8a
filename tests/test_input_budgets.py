"""Total budgets on what ``diag report`` and ``diag merge`` take in (issue #25): a crafted bundle
of 200,000 processes made ``report`` use 1.9 GiB and ``merge`` 4 GiB over two minutes. Past the
documented caps each is refused at once with a one-line error naming the cap, not rendered."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import msgspec
import pytest
from conftest import DIAG, run_diag

from bench.synth import make_bundle
from diag.bundle import io
from diag.bundle.io import load_bundle, write_bundle
from diag.errors import EXIT_BAD_BUNDLE, DiagError
from diag.model import Bundle, ProcessInfo


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


def _string_bundle(path: Path, strings: int) -> None:
    """A bundle whose one process has ``strings`` two-character argv entries: ~5 bytes each on
    disk, ~85 bytes each decoded (issue #32: 125 MB of it took 2.1 GB)."""
    bundle = make_bundle(ranks=1, threads=1, samples=1)
    proc = msgspec.structs.replace(bundle.processes[0], cmdline=("PLACEHOLDER",))
    data = msgspec.json.encode(msgspec.structs.replace(bundle, processes=(proc,)))
    body = b",".join(b'"%02d"' % (i % 100) for i in range(strings))
    path.write_bytes(data.replace(b'"PLACEHOLDER"', body))


def _peak_rss_kib(argv: List[str], tmp_path: Path) -> Tuple[int, subprocess.CompletedProcess[str]]:
    """Run ``argv``; its peak RSS (KiB), read by a parent of its own (getrusage of children)."""
    report = tmp_path / "rss"
    wrapper = (
        "import resource, subprocess, sys; r = subprocess.run(sys.argv[2:]); "
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
        "open(sys.argv[1], 'w').write(str(peak)); sys.exit(r.returncode)"
    )
    result = subprocess.run(
        [sys.executable, "-c", wrapper, str(report), *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return int(report.read_text()), result


@pytest.mark.slow
def test_a_crafted_bundle_that_would_decode_into_gigabytes_is_refused_unparsed(
    tmp_path: Path,
) -> None:
    """125 MB of short argv strings (2.5 GiB estimated; 2.1 GB when it was decoded) is refused
    by ``summary``, ``report`` and ``merge`` from its byte counts, in one line, the process
    never past a few hundred MB."""
    path = tmp_path / "strings.json"
    _string_bundle(path, 25_000_000)
    assert io.decode_estimate_bytes(path.read_bytes()) > io.MAX_DECODE_BYTES
    for args in (
        ["summary", "--json", str(path)],
        ["report", str(path), "-o", str(tmp_path / "r.html")],
        ["merge", str(path), str(path), "-o", str(tmp_path / "m")],
    ):
        peak_kib, result = _peak_rss_kib([*DIAG, *args], tmp_path)
        assert result.returncode == EXIT_BAD_BUNDLE, (args, result.stderr)
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "GiB to decode" in lines[0], lines
        assert peak_kib < 400 * 1024, (args, peak_kib)
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "m.json").exists()


def test_the_decode_budget_of_a_merge_is_each_bundles_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge decodes and folds one bundle at a time (issue 35), so each bundle is held to
    the decode budget alone: three that each fit merge though their sum does not; one that
    does not fit is refused before it is decoded and recorded as a host not captured."""
    paths = []
    for host in range(3):
        path = tmp_path / f"h{host}.json"
        write_bundle(make_bundle(ranks=2, threads=4, samples=2), path)
        paths.append(str(path))
    one = io.decode_estimate_bytes(Path(paths[0]).read_bytes())
    monkeypatch.setattr(io, "MAX_DECODE_BYTES", int(one * 1.5))
    from diag.commands.merge import run_merge

    merged = run_merge(paths, str(tmp_path / "m")).bundle
    assert [e.status for e in merged.hosts] == ["ok", "ok", "ok"]
    big = tmp_path / "big.json"
    write_bundle(make_bundle(ranks=4, threads=8, samples=4), big)
    merged = run_merge([*paths, str(big)], str(tmp_path / "m2")).bundle
    failed = [e for e in merged.hosts if e.status == "failed"]
    assert [e.name for e in failed] == ["big.json"] and "GiB to decode" in failed[0].reason


def _ticks_moved(bundle: Bundle, ticks: int) -> Bundle:
    """``bundle`` with every thread's user ticks moved: none of its thread records equal."""
    replace = msgspec.structs.replace
    samples = tuple(
        replace(s, processes=tuple(
            replace(p, threads=tuple(replace(t, utime_ticks=t.utime_ticks + ticks)
                                     for t in p.threads))
            for p in s.processes))
        for s in bundle.samples
    )  # fmt: skip
    return replace(bundle, samples=samples)


def test_a_merge_counts_the_thread_records_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record cap of a merge is on what it holds: the same bundle merged three times holds
    its thread records once; bundles of other records each add theirs, and the merge stops."""
    bundle = make_bundle(ranks=2, threads=4, samples=2)
    records = io.thread_records(bundle)
    same = []
    for host in range(3):
        path = tmp_path / f"h{host}.json"
        write_bundle(bundle, path)
        same.append(str(path))
    monkeypatch.setattr(io, "MAX_THREAD_RECORDS", records * 2)
    from diag.commands.merge import run_merge

    assert len(run_merge(same, str(tmp_path / "m")).bundle.hosts) == 3
    other = []
    for host in range(3):
        path = tmp_path / f"o{host}.json"
        write_bundle(_ticks_moved(bundle, 1000 * host), path)
        other.append(str(path))
    with pytest.raises(io.OverBudget) as info:
        run_merge(other, str(tmp_path / "m2"))
    assert "the 3 bundles together" in info.value.one_line()


def test_a_journal_is_stopped_at_the_line_that_passes_the_record_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines that repeat a process's tids as unchanged cost a reference per tid, not their
    bytes: the cap is checked as lines come - a line after the one over the cap is never
    decoded (here it could not be: it is not JSON)."""
    from diag.bundle.io import JournalWriter

    bundle = make_bundle(ranks=1, threads=50, samples=12)
    path = tmp_path / "w.jsonl"
    writer = JournalWriter(path)
    writer.header(bundle.host, bundle.target, bundle.created_s)
    for sample in bundle.samples:
        writer.sample(sample, bundle.processes)
    writer.close()
    with path.open("ab") as fh:
        fh.write(b"this line is not json\n" + b'{"kind":"end"}\n')
    monkeypatch.setattr(io, "MAX_THREAD_RECORDS", 200)
    with pytest.raises(io.OverBudget) as info:
        load_bundle(path)
    assert "thread records" in info.value.one_line()
