"""Secrets that leak through *how* text reaches diag, not through their form (issue #25).

- a log line cut at ``MAX_LINE_CHARS`` before it was scrubbed (a learned secret straddling
  the cut), a ``key=\\rVALUE`` whose last ``\\r`` segment alone is kept, colour codes between
  a key and its value;
- the launch tee writing a line that never ends in pieces (a secret split across two pieces
  appears whole in ``PATH.log``);
- a wrapper that ``export``s a token and ``exec``s the job, a target that rewrites its environ
  block: the environment must be read again when a PID's exe or environ changes;
- a secret printed before the process carrying it appears: the journal (and the launch log)
  written before diag learned it is scrubbed afterwards.
"""

from __future__ import annotations

import io
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from diag.bundle.io import JournalWriter, load_bundle
from diag.model import HostInfo, ProbeFailure, Target
from diag.probes.logs import MAX_LINE_CHARS, LogTracker
from diag.redaction.redact import PLACEHOLDER, Redactor
from diag.watch.launch import launch


def _wait(cond: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


# -- log lines ------------------------------------------------------------------------------


def test_log_lines_are_scrubbed_before_the_cut_the_cr_and_the_colours(tmp_path: Path) -> None:
    learned = "Learned-" + secrets.token_hex(16)
    cr, ansi = secrets.token_hex(12), secrets.token_hex(12)
    straddle = "x" * (MAX_LINE_CHARS - 10) + " " + learned + " tail"
    log = tmp_path / "job.log"
    log.write_text(
        "\n".join(
            [
                straddle,
                f"api_key=\r{cr}",
                f"\x1b[36mapi_key \x1b[0m= \x1b[35m{ansi}\x1b[0m",
                "Loading 10%\rLoading 100%",
                "step 1 loss 2.5",
            ]
        )
        + "\n"
    )
    r = Redactor()
    r.add_secret(learned)
    (sample,) = LogTracker(r, [str(log)]).sample()
    text = "\n".join(sample.head + sample.tail)
    for value in (learned[:20], learned[-20:], cr, ansi):
        assert value not in text, (value, text)
    assert "Loading 100%" in sample.tail and "step 1 loss 2.5" in sample.tail
    assert any(line.endswith("chars]") for line in sample.tail)  # still cut


def test_a_learned_secret_cut_by_a_read_bound_loses_its_first_characters_too() -> None:
    """Names read from a process's memory are cut at 4 KiB and marked: the part of a learned
    secret before the cut no longer matches it whole, and goes as well."""
    secret = "Learned-" + secrets.token_hex(16)
    r = Redactor()
    r.add_secret(secret)
    for cut in (8, 20, len(secret) - 1):
        text = "thread-" + secret[:cut] + "\u2026[truncated]"
        assert r.scrub(text) == f"thread-{PLACEHOLDER}\u2026[truncated]", cut
    short = "thread-Lea\u2026[truncated]"  # too short a prefix to say anything
    assert r.scrub(short) == short


# -- the launch tee -------------------------------------------------------------------------

LONG_LINE = r"""
import os, sys
secret, n = sys.argv[1], int(sys.argv[2])
unit = ('p' * 3 + ' ' + secret + ' ').encode()
out = b''.join(unit for _ in range(n))
for i in range(0, len(out), 4093):  # odd-sized writes: pieces end anywhere
    os.write(1, out[i:i + 4093])
os.write(1, b' api_key=' + b'k' * 65530 + b' and ' + b'z' * 30)
os.write(1, b'\n')
"""


def test_launch_tee_never_splits_a_secret_across_pieces(tmp_path: Path) -> None:
    """A 200 KiB line without newline, a learned secret every 49 characters: whatever the
    piece boundaries, PATH.log holds no copy of it (nor a half of it next to the other)."""
    secret = "S3cr" + secrets.token_hex(20)
    r = Redactor()
    r.add_secret(secret)
    log = tmp_path / "run.log"
    launched = launch(
        [sys.executable, "-c", LONG_LINE, secret, "4000"],
        log,
        scrub=r.scrub,
        terminal_out=io.BytesIO(),
        terminal_err=io.BytesIO(),
    )
    launched.wait(30)
    launched.close()
    data = log.read_text()
    assert secret not in data and secret[:12] not in data and secret[-12:] not in data
    assert data.count(PLACEHOLDER) >= 4000
    assert data.endswith(" and " + "z" * 30 + "\n")


# -- the environment read again -------------------------------------------------------------

EXEC_LATER = r"""
import os, sys, time
value, ready, go = sys.argv[1], sys.argv[2], sys.argv[3]
open(ready, 'w').close()
while not os.path.exists(go):
    time.sleep(0.02)
env = dict(os.environ, HF_TOKEN=value)
os.execve('/bin/sleep', ['sleep', '60'], env)
"""

REWRITE_ENVIRON = r"""
import ctypes, os, sys, time
value, ready, go = sys.argv[1], sys.argv[2], sys.argv[3]
open(ready, 'w').close()
while not os.path.exists(go):
    time.sleep(0.02)
fields = open('/proc/self/stat').read().rsplit(')', 1)[1].split()
env_start, env_end = int(fields[47]), int(fields[48])
block = ('HF_TOKEN=' + value).encode() + b'\0'
block += b'\0' * (env_end - env_start - len(block))
ctypes.memmove(env_start, block, len(block))
open(go + '.done', 'w').close()
time.sleep(60)
"""


@pytest.mark.parametrize("program", [EXEC_LATER, REWRITE_ENVIRON], ids=["exec", "rewrite"])
def test_environment_is_read_again_after_exec_or_rewrite(tmp_path: Path, program: str) -> None:
    from diag.collect.collector import Collector

    value = "tok-" + secrets.token_hex(20)
    ready, go = tmp_path / "ready", tmp_path / "go"
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "RANK": "0", "PAD": "p" * 200}
    proc = subprocess.Popen([sys.executable, "-c", program, value, str(ready), str(go)], env=env)
    collector = Collector(proc.pid, workers=0)
    try:
        assert _wait(ready.exists)
        collector.take_sample(0)
        assert collector.redactor.scrub(value) == value  # not known yet
        go.touch()
        changed = _wait(
            lambda: (
                Path(f"{go}.done").exists()
                or os.readlink(f"/proc/{proc.pid}/exe") == os.path.realpath("/bin/sleep")
            )
        )
        assert changed
        collector.take_sample(1)
        assert collector.redactor.scrub(f"x {value} y") == f"x {PLACEHOLDER} y"
    finally:
        collector.close()
        proc.kill()
        proc.wait()


# -- written before it was learned ----------------------------------------------------------


def test_journal_is_scrubbed_of_a_secret_learned_after_it_was_written(tmp_path: Path) -> None:
    secret = "late-" + secrets.token_hex(16)
    r = Redactor()
    path = tmp_path / "run.jsonl"
    journal = JournalWriter(path, scrub=r.scrub_bytes)
    failure = ProbeFailure(probe="logs", reason=f"a line said {secret}")
    journal.header(HostInfo(), Target(), 1.0, failures=(failure,))
    assert secret in path.read_text()  # not known when written
    r.add_secret(secret)  # a worker carrying it appeared
    journal.end(None, None)
    journal.close()
    text = path.read_text()
    assert secret not in text and PLACEHOLDER in text
    assert load_bundle(path).complete
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_journal_search_finds_a_late_secret_across_read_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal is searched 16 MiB at a time: a value straddling two reads is found."""
    from diag.bundle import rescrub

    monkeypatch.setattr(rescrub, "_CHUNK", 64)
    secret = "late-" + secrets.token_hex(16)
    r = Redactor()
    path = tmp_path / "run.jsonl"
    journal = JournalWriter(path, scrub=r.scrub_bytes)
    reason = "x" * 37 + secret  # the value starts inside the first 64-byte read
    journal.header(HostInfo(), Target(), 1.0, failures=(ProbeFailure("logs", reason),))
    r.add_secret(secret)
    journal.close()
    assert secret not in path.read_text() and load_bundle(path).failures


PRINT_FIRST = r"""
import sys, time
print('the token is', sys.argv[1], flush=True)
print('more ' + 'x' * 100, flush=True)
"""


def test_launch_log_is_scrubbed_of_a_secret_learned_after_it_was_printed(tmp_path: Path) -> None:
    secret = "late-" + secrets.token_hex(16)
    r = Redactor()
    mark = r.mark()
    log = tmp_path / "run.log"
    launched = launch(
        [sys.executable, "-c", PRINT_FIRST, secret],
        log,
        scrub=r.scrub,
        terminal_out=io.BytesIO(),
        terminal_err=io.BytesIO(),
        rescrub=lambda data: r.rescrub_bytes(data, mark),
    )
    launched.wait(30)
    launched.drain()
    r.add_secret(secret)
    launched.close()
    text = log.read_text()
    assert secret not in text and f"the token is {PLACEHOLDER}" in text


# -- end to end: diag watch -- CMD ------------------------------------------------------------

WRAPPER = r"""
import os, sys, time
token, ansi = os.environ['LATER_SRC'][::-1], os.environ['ANSI_SRC'][::-1]
print('\x1b[36mapi_key \x1b[0m= \x1b[35m' + ansi + '\x1b[0m', flush=True)
print('the token is', token, flush=True)  # printed before any process carries it
time.sleep(2.5)
worker = 'import time\nprint("worker up", flush=True)\ntime.sleep(3)'
env = {k: v for k, v in os.environ.items() if not k.endswith('_SRC')}
env['HF_TOKEN'] = token  # export + exec: the same PID, a new environ
os.execve(sys.executable, [sys.executable, '-c', worker], env)
"""


@pytest.mark.slow
def test_watch_launch_no_late_or_coloured_secret_in_any_output(tmp_path: Path) -> None:
    from tests.conftest import run_diag

    token, ansi = "late-" + secrets.token_hex(16), secrets.token_hex(12)
    out = tmp_path / "run.html"
    env = dict(os.environ, LATER_SRC=token[::-1], ANSI_SRC=ansi[::-1])
    result = run_diag(
        ["watch", "--interval", "0.5", "-o", str(out), "--", sys.executable, "-c", WRAPPER],
        env=env,
    )
    assert result.returncode == 0, result.stderr
    files = {p.name: p.read_text(errors="replace") for p in tmp_path.iterdir() if p.is_file()}
    assert {"run.html", "run.json", "run.jsonl", "run.md", "run.log"} <= set(files), files
    assert "worker up" in files["run.log"] and "the token is" in files["run.log"]
    leaks = [(name, v[:8]) for name, text in files.items() for v in (token, ansi) if v in text]
    leaks += [("stderr", v[:8]) for v in (token, ansi) if v in result.stderr]
    assert not leaks, leaks
