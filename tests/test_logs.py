"""The log probe: discovery from real fds, incremental counts, rotation, truncation, redaction."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from diag.model import LogSample
from diag.probes import logs as logs_mod
from diag.probes.logs import (
    MAX_LINE_CHARS,
    LogTracker,
    clean_line,
    head_lines,
    is_write_mode,
    looks_like_log,
    tail_lines,
)
from diag.redaction.redact import PLACEHOLDER, Redactor
from tests.conftest import Started

# A process whose stdout/stderr go to files and that holds other files open; it signals
# readiness with a marker file since its stdout is not a pipe to the test.
WRITER = r"""
import os, sys, time
d = sys.argv[1]
os.makedirs(d + '/logs', exist_ok=True)
app = open(d + '/app.log', 'a')                # a log, open for writing
metrics = open(d + '/logs/metrics.txt', 'a')   # .txt under a log dir: a log
data = open(d + '/data.txt', 'w')              # .txt elsewhere: not a log
model = open(d + '/weights.safetensors', 'w')  # never a log
src = open(d + '/input.log', 'a+'); src.close()
inp = open(d + '/input.log', 'r')              # a .log opened read-only: not written
app.write('app started\n'); app.flush()
print('stdout line', flush=True)
print('stderr line', file=sys.stderr, flush=True)
open(d + '/ready', 'w').close()
time.sleep(120)
"""


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Started]:
    """WRITER with stdout/stderr redirected to files; ready when its marker file exists.

    conftest's spawn() reads READY from a stdout pipe, which this program must not have.
    """
    with open(tmp_path / "job.out", "w") as out, open(tmp_path / "job.err", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path)],
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    started = Started(proc, [])
    while not (tmp_path / "ready").exists():
        if proc.poll() is not None:
            pytest.fail((tmp_path / "job.err").read_text())
        time.sleep(0.01)
    yield started
    started.stop()


def _by_path(samples: Any) -> Dict[str, LogSample]:
    return {s.path: s for s in samples}


def test_discovers_stdio_files_and_open_logs_only(writer: Started, tmp_path: Path) -> None:
    tracker = LogTracker(Redactor())
    tracker.discover([writer.pid])
    assert set(tracker.paths) == {
        str(tmp_path / "job.out"),
        str(tmp_path / "job.err"),
        str(tmp_path / "app.log"),
        str(tmp_path / "logs" / "metrics.txt"),
    }
    samples = _by_path(tracker.sample())
    out = samples[str(tmp_path / "job.out")]
    assert out.pids == (writer.pid,) and out.exists and out.lines == 1
    assert out.tail == ("stdout line",) and out.head == ("stdout line",)
    assert samples[str(tmp_path / "app.log")].lines == 1
    assert out.inode == os.stat(tmp_path / "job.out").st_ino and out.mtime_s > 0


def test_stdout_pipe_is_noted_not_read(spawn: Any) -> None:
    target: Started = spawn([sys.executable, "-c", "import time; print('READY'); time.sleep(60)"])
    tracker = LogTracker(Redactor())
    tracker.discover([target.pid])
    assert tracker.paths == ()
    assert any(f"pid {target.pid} stdout is a pipe" in n for n in tracker.notes())


def test_deleted_log_still_open_is_noted(spawn: Any, tmp_path: Path) -> None:
    code = (
        "import os, sys, time\n"
        "f = open(sys.argv[1], 'a'); f.write('x\\n'); f.flush(); os.unlink(sys.argv[1])\n"
        "print('READY', flush=True); time.sleep(60)\n"
    )
    target: Started = spawn([sys.executable, "-c", code, str(tmp_path / "gone.log")])
    tracker = LogTracker(Redactor())
    tracker.discover([target.pid])
    assert tracker.paths == ()
    assert any("deleted file" in n and "gone.log" in n for n in tracker.notes())


def test_growing_file_is_counted_incrementally(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("a\nb\n")
    tracker = LogTracker(Redactor(), [str(log)])
    assert tracker.sample()[0].lines == 2
    with open(log, "a") as fh:
        fh.write("c\npartial")
    first = tracker.sample()[0]
    assert first.lines == 4 and first.tail == ("a", "b", "c", "partial")
    with open(log, "a") as fh:
        fh.write(" line\nd\n")
    second = tracker.sample()[0]
    assert second.lines == 5 and second.tail[-2:] == ("partial line", "d")
    assert second.size_bytes == log.stat().st_size


def test_rotation_recounts_the_new_file(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("".join(f"old {i}\n" for i in range(10)))
    tracker = LogTracker(Redactor(), [str(log)])
    before = tracker.sample()[0]
    os.rename(log, tmp_path / "train.log.1")
    log.write_text("new 0\n")
    after = tracker.sample()[0]
    assert before.lines == 10 and after.lines == 1
    assert after.inode != before.inode
    assert after.head == ("new 0",) and after.tail == ("new 0",)


def test_truncation_recounts(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    tracker = LogTracker(Redactor(), [str(log)])
    assert tracker.sample()[0].lines == 100
    with open(log, "r+") as fh:
        fh.truncate(0)
    assert tracker.sample()[0].lines == 0
    log.write_text("fresh\n")
    assert tracker.sample()[0].lines == 1


def test_copytruncate_then_regrowth_past_the_old_offset_is_caught(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("first run\n")
    tracker = LogTracker(Redactor(), [str(log)])
    assert tracker.sample()[0].lines == 1
    log.write_text("".join(f"second run {i}\n" for i in range(5)))  # same inode, bigger
    sample = tracker.sample()[0]
    assert sample.lines == 5 and sample.head[0] == "second run 0"


def test_missing_then_created(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    tracker = LogTracker(Redactor(), [str(log)])
    missing = tracker.sample()[0]
    assert missing.exists is False and missing.lines == 0
    log.write_text("x\n")
    assert tracker.sample()[0].exists is True


def test_huge_file_is_not_read_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs_mod, "INITIAL_COUNT_LIMIT_BYTES", 1000)
    log = tmp_path / "big.log"
    log.write_text("".join(f"row {i:05d}\n" for i in range(500)))  # 5,000 bytes
    tracker = LogTracker(Redactor(), [str(log)])
    first = tracker.sample()[0]
    assert first.lines == 0 and first.lines_exact is False
    assert first.tail[-1] == "row 00499" and first.head[0] == "row 00000"
    with open(log, "a") as fh:
        fh.write("new 1\nnew 2\n")
    second = tracker.sample()[0]
    assert second.lines == 2 and second.lines_exact is False  # deltas stay true


def test_head_tail_lines_are_redacted_and_cut(tmp_path: Path) -> None:
    redactor = Redactor()
    redactor.add_secret("learned-secret-value")
    log = tmp_path / "svc.log"
    log.write_text(
        "Authorization: Bearer abcdef0123456789\n"
        "token=qwertyuiop12345 and learned-secret-value\n" + "x" * 5000 + "\n"
        "\x1b[32mgreen\x1b[0m\n"
    )
    sample = LogTracker(redactor, [str(log)]).sample()[0]
    assert sample.tail[0] == f"Authorization: Bearer {PLACEHOLDER}"
    assert sample.tail[1] == f"token={PLACEHOLDER} and {PLACEHOLDER}"
    assert len(sample.tail[2]) < MAX_LINE_CHARS + 30 and sample.tail[2].endswith("chars]")
    assert sample.tail[3] == "green"


PEM_BODY = tuple(
    f"PlantedPemBody{word}OfTheKeyBlockAbcdefghijklmnopqrstuvwxyz0123456"
    for word in ("One", "Two", "Six")
)


def test_pem_block_over_several_lines_goes_whole(tmp_path: Path) -> None:
    """A private key logged over lines: each body line alone reads like any base64, so the
    head and tail are scrubbed as one text and no line of the block is kept."""
    log = tmp_path / "svc.log"
    log.write_text(
        "starting\n-----BEGIN PRIVATE KEY-----\n"
        + "".join(line + "\n" for line in PEM_BODY)
        + "-----END PRIVATE KEY-----\nserving\n"
    )
    sample = LogTracker(Redactor(), [str(log)]).sample()[0]
    for kept in (sample.head, sample.tail):
        assert kept[0] == "starting" and kept[-1] == "serving"
        assert not any(body in line for line in kept for body in PEM_BODY), kept
        assert not any("PRIVATE KEY" in line for line in kept), kept


def test_tail_is_bounded_on_a_long_file(tmp_path: Path) -> None:
    log = tmp_path / "long.log"
    log.write_text("".join(f"line {i}\n" for i in range(20000)))
    sample = LogTracker(Redactor(), [str(log)]).sample()[0]
    assert sample.lines == 20000
    assert len(sample.tail) == 50 and sample.tail[-1] == "line 19999"
    assert len(sample.head) == 20 and sample.head[0] == "line 0"


@pytest.mark.parametrize(
    ("path", "is_log"),
    [
        ("/work/run/train.log", True),
        ("/work/run/slurm-123.out", True),
        ("/work/run/job.err", True),
        ("/work/run/train.log.3", True),
        ("/work/logs/metrics.txt", True),
        ("/work/data/corpus.txt", False),
        ("/work/model/model.safetensors", False),
        ("/usr/lib/libnccl.so", False),
        ("/work/train.py", False),
        ("/dev/pts/0", False),
    ],
)
def test_looks_like_log(path: str, is_log: bool) -> None:
    assert looks_like_log(path) is is_log


@pytest.mark.parametrize(
    ("flags", "writable"), [("0100001", True), ("02102", True), ("0100000", False), ("02", True)]
)
def test_fdinfo_write_mode(flags: str, writable: bool) -> None:
    assert is_write_mode(f"pos:\t0\nflags:\t{flags}\nmnt_id:\t30\n") is writable


def test_line_helpers() -> None:
    assert clean_line(b"Loading 10%\rLoading 50%\rLoading 100%\r\n") == "Loading 100%"
    assert clean_line(b"\xff bad\n") == "\ufffd bad"
    assert head_lines(b"a\nb\nc", at_eof=False) == [b"a", b"b"]
    assert head_lines(b"a\nb\nc", at_eof=True) == [b"a", b"b", b"c"]
    assert tail_lines(b"rt\nb\nc\n", at_start=False) == [b"b", b"c"]
    assert tail_lines(b"a\nb\n", at_start=True, count=1) == [b"b"]


def test_a_long_tqdm_line_redrawn_with_cr_survives_the_tail_window() -> None:
    """A bar redrawn a thousand times with \\r and no newline is one "line" longer than the
    tail window: the window starts mid-line, yet the bar's latest state is kept."""
    from diag.probes.logs import clean_line, tail_lines

    bars = b"".join(
        b"\rLoading: %3d%%|#| %d/1000 [00:10<00:05]" % (i // 10, i) for i in range(1000)
    )
    window = bars[-(64 << 10) :][7:]  # the read window cuts into a redraw
    (line,) = tail_lines(window, at_start=False)
    assert clean_line(line).startswith("Loading:  99%|#| 999/1000")


DEATH = "(EngineCore pid=77) ERROR Worker proc VllmWorker-1 died unexpectedly, token=hunter2hunter2"


def test_a_death_line_that_scrolls_past_between_samples_is_kept(tmp_path: Path) -> None:
    """A server shutting down on a worker's death writes far more than a tail after the line
    that says why: the probe keeps it from the bytes it counts, redacted."""
    log = tmp_path / "serve.log"
    log.write_text("Worker proc VllmWorker-0 died unexpectedly (an old run)\nstarting\n")
    tracker = LogTracker(Redactor(), [str(log)])
    assert tracker.sample()[0].deaths == ()  # the file's past: its tail shows it
    with open(log, "a") as fh:
        fh.write(
            "serving\n" + DEATH + "\n" + "".join(f'  File "x.py", line {n}\n' for n in range(5000))
        )
    sample = tracker.sample()[0]
    assert not any("VllmWorker-1" in line for line in sample.tail)
    assert sample.deaths == (DEATH.replace("hunter2hunter2", PLACEHOLDER),)
    assert tracker.sample()[0].deaths == ()  # nothing new since


def test_death_lines_across_chunks_and_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logs_mod, "_CHUNK_BYTES", 7)  # every line straddles a chunk boundary
    log = tmp_path / "serve.log"
    log.write_text("")
    tracker = LogTracker(Redactor(), [str(log)])
    tracker.sample()
    log.write_text("".join(f"rank {n} process died\nok\n" for n in range(40)))
    deaths = tracker.sample()[0].deaths
    assert deaths == tuple(f"rank {n} process died" for n in range(logs_mod.MAX_DEATH_LINES))


def test_death_lines_in_cuts_a_huge_line() -> None:
    data = b"a" * 100_000 + b" Segmentation fault " + b"b" * 100_000 + b"\nnext\n"
    (line,) = logs_mod.death_lines_in(data)
    assert b"Segmentation fault" in line and len(line) <= 2 * 4096 + 20


@pytest.mark.parametrize(
    "line",
    [
        "Worker proc VllmWorker-1 died unexpectedly (exit code: None)",
        "rank 3 process is dead",
        "child process exited unexpectedly",
        "worker 7 was killed by signal 9",
        "engine terminated unexpectedly",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue",
        "Segmentation fault (core dumped)",
        "failed (exitcode: -9) local_rank: 1 (pid: 4242)",
    ],
)
def test_every_death_line_holds_a_keyword_the_probe_looks_for(line: str) -> None:
    """The probe matches the pattern only on lines holding a keyword: each way the pattern
    matches must hold one, or the probe would miss it."""
    from diag.text.death_lines import DEATH_KEYWORDS, is_death_line

    assert is_death_line(line)
    assert any(word in line.lower().encode() for word in DEATH_KEYWORDS)
    assert logs_mod.death_lines_in(f"noise\n{line}\nmore\n".encode()) == [line.encode()]
