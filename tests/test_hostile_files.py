"""Hostile files (issue #17): whatever a target's user can plant where diag reads or writes.

Every case is a real file on disk - a FIFO, /dev/zero, a symlink swapped in after discovery,
a pickle that nests without end, a file chowned to another user, a symlink planted at an
output path - and asserts the bound, the refusal or the one-line error, never a hang.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DIAG, run_diag

from diag.bundle.files import NotRegularFile, create_private, open_regular, read_regular
from diag.bundle.io import JournalWriter, load_bundle
from diag.errors import EXIT_BAD_BUNDLE, EXIT_OUTPUT, EXIT_USAGE, DiagError
from diag.model import ProcessInfo
from diag.probes.logs import LogTracker
from diag.probes.nccl import flight_recorder
from diag.probes.nccl.fr_dump import DumpError, decode_dump
from diag.probes.nccl.logs import read_file_lines
from diag.redaction.redact import Redactor

ROOT = os.geteuid() == 0


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.log"
    os.mkfifo(path)
    return path


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


# -- reading ---------------------------------------------------------------------------------


def test_open_regular_refuses_fifo_device_dir_and_symlink(tmp_path: Path, fifo: Path) -> None:
    link = tmp_path / "link.log"
    link.symlink_to("/dev/zero")
    for path, why in [
        (fifo, "FIFO"),
        (Path("/dev/zero"), "character device"),
        (tmp_path, "directory"),
        (link, "symlink"),
    ]:
        started = time.monotonic()
        with pytest.raises(NotRegularFile, match=why):
            open_regular(path)
        assert time.monotonic() - started < 1.0  # a FIFO is not waited on


def test_read_regular_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"a" * 1000 + b"TAIL")
    data, truncated = read_regular(path, 10, tail=True)
    assert (data, truncated) == (b"aaaaaaTAIL", True)
    assert read_regular(path, 10_000) == (b"a" * 1000 + b"TAIL", False)


@pytest.mark.parametrize("kind", ["dev-zero", "dir", "fifo"])
def test_cli_log_that_is_not_a_file_is_a_usage_error(tmp_path: Path, fifo: Path, kind: str) -> None:
    path = {"dev-zero": "/dev/zero", "dir": str(tmp_path), "fifo": str(fifo)}[kind]
    started = time.monotonic()
    result = run_diag(
        ["capture", "--pid", str(os.getpid()), "--count", "1", "--log", path], timeout_s=30
    )
    assert result.returncode == EXIT_USAGE, result.stderr
    line = _one_line(result.stderr)
    assert line.startswith(f"diag: --log: {path} is ") and "not a regular file" in line
    assert time.monotonic() - started < 20


def test_log_swapped_for_a_link_to_dev_zero_is_a_recorded_failure(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1\n")
    tracker = LogTracker(Redactor(), [str(log)])
    (first,) = tracker.sample()
    assert first.tail == ("step 1",) and first.error is None
    log.unlink()
    log.symlink_to("/dev/zero")  # the job's user swaps it after diag found it
    started = time.monotonic()
    (second,) = tracker.sample()
    assert time.monotonic() - started < 1.0
    assert second.error is not None and "symlink" in second.error
    assert second.tail == () and second.size_bytes == 0
    log.unlink()
    os.mkfifo(log)  # or for a FIFO: refused without blocking
    (third,) = tracker.sample()
    assert third.error is not None and "FIFO" in third.error


def test_nccl_log_scan_refuses_fifo_and_dev_zero_link(tmp_path: Path, fifo: Path) -> None:
    with pytest.raises(NotRegularFile):
        read_file_lines(str(fifo))
    link = tmp_path / "nccl.log"
    link.symlink_to("/dev/zero")
    with pytest.raises(NotRegularFile):
        read_file_lines(str(link))
    real = tmp_path / "real.log"
    real.write_text("x" * 100 + "\nNCCL WARN one\nNCCL INFO two\n")
    assert read_file_lines(str(real), max_bytes=20) == ["NCCL INFO two"]


# -- bundles ---------------------------------------------------------------------------------


def test_report_and_merge_refuse_fifo_and_dev_zero(tmp_path: Path, fifo: Path) -> None:
    for args in (
        ["report", str(fifo), "-o", str(tmp_path / "r")],
        ["report", "/dev/zero", "-o", str(tmp_path / "r")],
        ["merge", str(fifo), "/dev/zero", "-o", str(tmp_path / "m")],
    ):
        started = time.monotonic()
        result = run_diag(args, timeout_s=30)
        assert result.returncode == EXIT_BAD_BUNDLE, (args, result.stderr)
        assert "not a regular file" in _one_line(result.stderr)
        assert time.monotonic() - started < 20


@pytest.mark.parametrize(
    "content",
    [
        b'{"schema_version":1,"created_s":1e308}',
        b'{"schema_version":1,"created_s":1e999}',
        b'{"schema_version":1,"samples":' + b"[" * 200_000 + b"]" * 200_000 + b"}",
        b'{"kind":"header","schema_version":1}\n{"kind":"sample","sample":'
        + b"[" * 200_000
        + b"]" * 200_000
        + b'}\n{"kind":"end"}\n',
    ],
    ids=["1e308", "1e999", "deep", "deep-journal-line"],
)
def test_forged_bundle_is_a_bad_bundle_not_an_internal_error(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "forged.json"
    path.write_bytes(content)
    with pytest.raises(DiagError) as err:
        load_bundle(path)
    assert err.value.exit_code == EXIT_BAD_BUNDLE
    result = run_diag(["report", str(path), "-o", str(tmp_path / "r")], timeout_s=60)
    assert result.returncode == EXIT_BAD_BUNDLE, result.stderr
    _one_line(result.stderr)


def test_oversized_bundle_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from diag.bundle import io as bundle_io

    path = tmp_path / "big.json"
    path.write_bytes(b'{"schema_version":1}' + b" " * 5000)
    monkeypatch.setattr(bundle_io, "MAX_BUNDLE_BYTES", 4096)
    with pytest.raises(DiagError, match="larger than") as err:
        bundle_io.load_bundle(path)
    assert err.value.exit_code == EXIT_BAD_BUNDLE


# -- Flight Recorder -------------------------------------------------------------------------


def _doubling_pickle(levels: int) -> bytes:
    """L0 = []; Li = [L(i-1), L(i-1)] through the memo: a few hundred bytes on disk, 2**levels
    values to walk (the billion-laughs of pickle)."""
    data = bytearray(b"\x80\x04]\x94")
    for i in range(1, levels):
        data += b"(h" + bytes([(i - 1) % 256]) + b"h" + bytes([(i - 1) % 256]) + b"l\x94"
    return bytes(data + b".")


@pytest.mark.parametrize(
    "payload",
    [
        _doubling_pickle(30),  # 2**30 values, depth 30
        _doubling_pickle(68),  # deeper than the bound
        b"\x80\x04]\x94h\x00a.",  # a list that contains itself
        b"\x80\x04" + b"]" * 1_000_000 + b"a" * 999_999 + b".",  # a million nested lists
        b"{" + b'"a":[' * 100_000 + b"]" * 100_000 + b"}",  # deep JSON
    ],
    ids=["doubling-30", "doubling-68", "cycle", "nested-1e6", "deep-json"],
)
def test_fr_dump_that_nests_without_end_is_refused_quickly(tmp_path: Path, payload: bytes) -> None:
    if payload.startswith(b"\x80") and len(payload) < 1000:
        assert len(payload) <= 479 or payload == _doubling_pickle(68)
    started = time.monotonic()
    with pytest.raises(DumpError):
        decode_dump(payload)
    assert time.monotonic() - started < 10
    # And through the file reader, at a rank's dump path.
    path = tmp_path / "fr_rank_0"
    path.write_bytes(payload)
    records, problems = flight_recorder.collect(
        [ProcessInfo(pid=1, rank=0, env={"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_rank_")})]
    )
    assert records == () and len(problems) == 1 and "not a Flight Recorder dump" in problems[0]


def test_fr_dump_still_reads_a_real_shape() -> None:
    dump = {"entries": [{"collective_seq_id": 3, "profiling_name": "nccl:all_reduce"}]}
    assert decode_dump(pickle.dumps(dump)) == dump


def test_fr_dump_of_another_user_in_a_world_writable_dir_is_skipped(tmp_path: Path) -> None:
    if not ROOT:
        pytest.skip("chown needs root")
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp
    planted = shared / "nccl_trace_rank_0"
    planted.write_bytes(pickle.dumps({"entries": [{"collective_seq_id": 1}]}))
    os.chown(planted, 12345, 12345)
    rank = ProcessInfo(
        pid=1, rank=0, uid=0, env={"TORCH_FR_DUMP_TEMP_FILE": str(shared / "nccl_trace_rank_")}
    )
    records, problems = flight_recorder.collect([rank])
    assert records == ()
    assert len(problems) == 1 and "owned by uid 12345" in problems[0] and "skipped" in problems[0]
    # The rank's own file there is read.
    os.chown(planted, 0, 0)
    records, problems = flight_recorder.collect([rank])
    assert problems == () and len(records) == 1
    # Outside a world-writable dir: another user's file is refused too, root's is read.
    private = tmp_path / "private"
    private.mkdir()
    (private / "fr_0").write_bytes(planted.read_bytes())
    os.chown(private / "fr_0", 12345, 12345)
    rank = msgspec_replace(rank, env={"TORCH_FR_DUMP_TEMP_FILE": str(private / "fr_")})
    records, problems = flight_recorder.collect([rank])
    assert records == () and "neither the rank's uid 0 nor root" in problems[0]


def msgspec_replace(info: ProcessInfo, **changes: object) -> ProcessInfo:
    import msgspec

    return msgspec.structs.replace(info, **changes)


def test_fr_dump_link_to_dev_zero_is_refused(tmp_path: Path) -> None:
    (tmp_path / "fr_rank_0").symlink_to("/dev/zero")
    records, problems = flight_recorder.collect(
        [ProcessInfo(pid=1, rank=0, env={"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_rank_")})]
    )
    assert records == ()
    assert problems == () or "symlink" in problems[0]


# -- writing ---------------------------------------------------------------------------------


def test_create_private_never_writes_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    victim.chmod(0o644)
    link = tmp_path / "out.jsonl"
    link.symlink_to(victim)
    journal = JournalWriter(link)
    journal.close()
    assert victim.read_text() == "precious"
    assert not link.is_symlink() and (link.stat().st_mode & 0o777) == 0o600
    hard = tmp_path / "hard.log"
    os.link(victim, hard)
    with create_private(hard) as fh:
        fh.write(b"new")
    assert victim.read_text() == "precious" and hard.read_text() == "new"
    with pytest.raises(NotRegularFile):
        create_private(tmp_path)


def test_output_to_a_device_or_an_open_dir_is_refused(tmp_path: Path) -> None:
    result = run_diag(["capture", "--pid", str(os.getpid()), "--count", "1", "-o", "/dev/full"])
    assert result.returncode == EXIT_OUTPUT, result.stderr
    assert "/dev" in _one_line(result.stderr)
    assert not Path("/dev/full.json").exists()
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    result = run_diag(
        ["capture", "--pid", str(os.getpid()), "--count", "1", "-o", str(open_dir / "x")]
    )
    assert result.returncode == EXIT_OUTPUT
    assert "world-writable without the sticky bit" in _one_line(result.stderr)
    os.mkfifo(tmp_path / "y.json")
    result = run_diag(
        ["capture", "--pid", str(os.getpid()), "--count", "1", "-o", str(tmp_path / "y")],
        timeout_s=30,
    )
    assert result.returncode == EXIT_OUTPUT and "FIFO" in _one_line(result.stderr)


def test_planted_symlinks_at_output_paths_leave_the_victim_unchanged(tmp_path: Path) -> None:
    if not ROOT:
        pytest.skip("lchown to another uid needs root")
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    for ext in (".log", ".json", ".jsonl", ".html", ".md"):
        link = shared / f"run{ext}"
        link.symlink_to(victim)
        os.lchown(link, 12345, 12345)
    prog = "print('hello', flush=True)"
    result = run_diag(
        [
            "capture",
            "--count",
            "1",
            "--interval",
            "0.1",
            "-o",
            str(shared / "run"),
            "--",
            sys.executable,
            "-c",
            prog,
        ],
        timeout_s=120,
    )
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "root's file\n"
    for ext in (".log", ".json"):
        path = shared / f"run{ext}"
        assert not path.is_symlink() and (path.stat().st_mode & 0o777) == 0o600, ext
    assert "hello" in (shared / "run.log").read_text()


def test_watch_journal_and_log_are_private(tmp_path: Path) -> None:
    result = run_diag(
        [
            "watch",
            "--interval",
            "0.2",
            "--duration",
            "1",
            "-o",
            str(tmp_path / "w"),
            "--",
            sys.executable,
            "-c",
            "print('x')",
        ],
        timeout_s=120,
    )
    assert result.returncode == 0, result.stderr
    for ext in (".jsonl", ".log", ".json", ".html", ".md"):
        assert ((tmp_path / f"w{ext}").stat().st_mode & 0o777) == 0o600, ext
    assert not list(tmp_path.glob(".w.log.*"))  # the spool files are gone


# -- the job outlives diag -------------------------------------------------------------------


def test_launched_job_survives_diag_being_killed(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    prog = (
        "import time\n"
        "for i in range(30):\n"
        "    print('line', i, flush=True)\n"
        "    time.sleep(0.1)\n"
        f"open({str(marker)!r}, 'w').write('done')\n"
    )
    diag = subprocess.Popen(
        [
            *DIAG,
            "watch",
            "--interval",
            "0.5",
            "-o",
            str(tmp_path / "run"),
            "--",
            sys.executable,
            "-c",
            prog,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log = tmp_path / ".run.log.stdout"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and b"line 0" not in (
        log.read_bytes() if log.exists() else b""
    ):
        time.sleep(0.05)
    time.sleep(1.0)
    diag.send_signal(signal.SIGKILL)
    diag.wait(10)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not marker.exists():
        time.sleep(0.1)
    assert marker.read_text() == "done"  # the job ran to its end, diag's death did not kill it
    assert b"line 29" in log.read_bytes()  # and its output is all on disk
