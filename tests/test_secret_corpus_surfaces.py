"""Planted secrets on the surfaces issue 32 found leaking: ``diag ps``, ``ps --json``, the MCP
``list_jobs`` answer, and a capture's every output - from real processes that hide them where
bounded reads and argv rules missed them.

- A secret variable past the bound ``diag ps`` keeps of an environment (thousands of
  variables before it), whose value the job's process title also carries bare: the value is
  learned from the whole environment, streamed, before any bound cuts it.
- A process title rewritten in place (setproctitle: ``/proc/PID/cmdline`` one string with
  spaces) and a ``sh -c 'python x.py --token V'`` wrapper: split like any argv, so their
  values are learned and scrubbed where they show up bare (a thread name).

Values are random per run, so a pass cannot come from a hard-coded string.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping

import pytest
from conftest import PROGRAMS, run_diag

from diag.probes.env import learn_environ, parse_environ, stream_environ
from diag.probes.jobs import ENVIRON_MAX_BYTES
from diag.redaction.redact import PLACEHOLDER, Redactor

FLOOD_VARS = 12_000  # about 430 KiB of plain variables before the planted one


def _flood_env(planted_name: str, planted: str) -> Dict[str, str]:
    """RANK early (a job by its environment), then a flood of harmless variables, then the
    secret one - past what ``diag ps`` keeps of the block."""
    env = {"RANK": "0", "WORLD_SIZE": "1"}
    env.update({f"FLOOD_VAR_{i:05d}": f"plain-value-{i:08d}-xxxxxxxx" for i in range(FLOOD_VARS)})
    assert sum(len(k) + len(v) + 2 for k, v in env.items()) > ENVIRON_MAX_BYTES
    env[planted_name] = planted
    return env


def _leaks(planted: Mapping[str, str], where: str, text: str) -> List[str]:
    return [f"{name} in {where}" for name, value in planted.items() if value in text]


def _surfaces(pid: int, tmp_path: Path) -> Dict[str, str]:
    """What ``diag ps``, ``ps --json`` and MCP ``list_jobs`` say, each checked to list the
    job of ``pid`` (not vacuous)."""
    human = run_diag(["ps", "--no-gpu"], timeout_s=120)
    machine = run_diag(["ps", "--json", "--no-gpu"], timeout_s=120)
    assert human.returncode == 0 and machine.returncode == 0, (human.stderr, machine.stderr)
    doc = json.loads(machine.stdout)
    roots = [j["root_pid"] for j in doc["jobs"] if pid in j["pids"]]
    assert len(roots) == 1, doc["jobs"]
    assert f"diag capture --pid {roots[0]}\n" in human.stdout, human.stdout
    out = {
        "ps stdout": human.stdout,
        "ps stderr": human.stderr,
        "ps --json": machine.stdout,
        "ps --json stderr": machine.stderr,
    }
    pytest.importorskip("pydantic")
    from diag.mcp.server import Tools

    answer = Tools(tmp_path / "mcp").list_jobs()
    assert roots[0] in {j["root_pid"] for j in answer["jobs"]}
    out["MCP list_jobs"] = json.dumps(answer, ensure_ascii=False)
    return out


def _capture(pid: int, out: Path) -> Dict[str, str]:
    """``diag capture --json``'s stdout, stderr and every file it wrote."""
    out.mkdir()
    done = run_diag(
        ["capture", "--pid", str(pid), "--count", "2", "--interval", "0.3", "--json",
         "-o", str(out / "run")],
        cwd=out,
        timeout_s=300,
    )  # fmt: skip
    assert done.returncode in (0, 10), done.stderr
    texts = {"capture --json": done.stdout, "capture stderr": done.stderr}
    for path in out.iterdir():
        if path.is_file():
            texts[path.name] = path.read_bytes().decode("utf-8", "replace")
    assert {"run.json", "run.html", "run.md"} <= set(texts), sorted(texts)
    pytest.importorskip("pydantic")
    from diag.mcp.server import Tools

    summary = Tools(out / "mcp").summary(str(out / "run.json"))
    texts["MCP summary"] = json.dumps(summary, ensure_ascii=False)
    return texts


def _all_leaks(planted: Mapping[str, str], texts: Mapping[str, str]) -> List[str]:
    return [leak for where, text in texts.items() for leak in _leaks(planted, where, text)]


@pytest.mark.slow
def test_a_secret_past_the_environment_bound_and_in_the_title_leaks_nowhere(
    spawn: Any, tmp_path: Path
) -> None:
    planted = {
        "env past the bound": "pastbound" + secrets.token_hex(12),
        "title --api-key": "titlekey" + secrets.token_hex(12),
        "title token=": "titletok" + secrets.token_hex(12),
        "title cookie": "titlecookie" + secrets.token_hex(12),
    }
    title = (
        f"worker --note {planted['env past the bound']} --api-key={planted['title --api-key']}"
        f" token={planted['title token=']} -H 'Cookie: a=1; theme={planted['title cookie']}'"
        " --port 8000"
    )
    env = _flood_env("ZZZ_SERVICE_TOKEN", planted["env past the bound"])
    # A thread named with the title's key, bare: only a value learned from the title
    # (split like an argv) scrubs it.
    env["PLANT_THREAD_SRC"] = f"conn-{planted['title --api-key']}"[::-1]
    job = spawn([sys.executable, str(PROGRAMS / "secret_title.py"), title], env=env)
    cmdline = Path(f"/proc/{job.pid}/cmdline").read_bytes().rstrip(b"\0")
    assert b"\0" not in cmdline and cmdline.startswith(b"worker --note ")  # one string

    texts = _surfaces(job.pid, tmp_path)
    assert "worker --note <redacted>" in texts["ps --json"], texts["ps --json"]
    texts.update(_capture(job.pid, tmp_path / "out"))
    assert not _all_leaks(planted, texts), _all_leaks(planted, texts)
    assert "conn-<redacted>" in texts["run.json"]  # the thread was seen, its name scrubbed


@pytest.mark.slow
def test_an_sh_c_wrapper_is_split_like_any_argv(spawn: Any, tmp_path: Path) -> None:
    planted = {
        "sh -c --token V": "shtoken" + secrets.token_hex(12),
        "sh -c DB_PASS=": "shpass" + secrets.token_hex(12),
        "sh -c --password 'a b'": "shquoted" + secrets.token_hex(12),
    }
    quoted = planted["sh -c --password 'a b'"]
    inner = (
        f"DB_PASS={planted['sh -c DB_PASS=']} {sys.executable} {PROGRAMS / 'secret_title.py'}"
        f" 'trainer --token {planted['sh -c --token V']}"
        f' --password "{quoted} x"\'; exit 0'
    )
    # The child names a thread with each value bare: only values learned from the wrapper's
    # command string scrub them.
    thread = f"{planted['sh -c --token V']}-{planted['sh -c DB_PASS=']}-{quoted} x"
    job = spawn(["sh", "-c", inner], env={"RANK": "0", "PLANT_THREAD_SRC": thread[::-1]})
    # ps lists the job from its python (a shell is where a job starts, not a job); the
    # capture of the shell's tree holds the wrapper's command line.
    child = int(Path(f"/proc/{job.pid}/task/{job.pid}/children").read_text().split()[0])
    texts = _surfaces(child, tmp_path)
    texts.update(_capture(job.pid, tmp_path / "out"))
    assert not _all_leaks(planted, texts), _all_leaks(planted, texts)
    assert "<redacted>-<redacted>-<redacted>" in texts["run.json"]


# -- the streamed environment, on files of known shape ---------------------------------------


def test_stream_environ_learns_every_secret_of_the_whole_block(tmp_path: Path) -> None:
    """Secrets past what is kept, across chunk edges, a name given twice, an entry too long
    to keep: all learned; only the head is returned."""
    first, second, late = ("dup" + secrets.token_hex(10) for _ in range(3))
    entries = [b"RANK=0", b"API_TOKEN=" + first.encode()]
    entries += [b"PAD_%06d=%s" % (i, b"p" * 40) for i in range(20_000)]
    entries += [b"API_TOKEN=" + second.encode(), b"LATE_SECRET=" + late.encode()]
    block = tmp_path / "environ"
    block.write_bytes(b"\0".join(entries) + b"\0")
    r = Redactor()
    head = stream_environ(str(block), r, keep_bytes=4096)
    assert head is not None and head.startswith(b"RANK=0\0") and len(head) <= 4096
    assert head.endswith(b"\0") and parse_environ(head)["RANK"] == "0"
    for value in (first, second, late):
        assert value not in r.scrub(f"echo {value}")


def test_a_value_cut_by_the_bound_is_redacted_with_what_follows(tmp_path: Path) -> None:
    """The read's bound ends inside a secret variable: what follows its head in a text (the
    part never read) goes with it."""
    value = "cutvalue" + secrets.token_hex(40)
    block = tmp_path / "environ"
    block.write_bytes(b"RANK=0\0" + b"MY_SECRET=" + value.encode() + b"\0")
    r = Redactor()
    stream_environ(str(block), r, keep_bytes=4096, max_bytes=7 + 10 + 30)
    assert r.scrub(f"--note {value} --port 1") == f"--note {PLACEHOLDER} --port 1"
    r2 = Redactor()
    learn_environ(r2, block.read_bytes()[:60], cut=True)
    assert value[20:] not in r2.scrub(f'{{"note": "{value}"}}')


def test_a_title_and_an_sh_c_command_teach_their_values() -> None:
    r = Redactor()
    key, tok, pw = ("v" + secrets.token_hex(10) for _ in range(3))
    out = r.scrub_argv((f"worker --api-key={key} token={tok} --port 8000",))
    assert key not in out[0] and tok not in out[0] and "--port 8000" in out[0]
    r.scrub_argv(("sh", "-c", f"cd /x && DB_PASS={pw} python t.py; exit 0"))
    assert (
        r.scrub(f"thread {key}-{tok}-{pw}") == f"thread {PLACEHOLDER}-{PLACEHOLDER}-{PLACEHOLDER}"
    )


# -- forms across lines and cookies, through watch's launch log and journal too --------------


def _line_plants() -> Dict[str, str]:
    keys = ("bearer", "flagnext", "learned", "cookie", "xsrf", "setc", "pw")
    values = {k: k + secrets.token_hex(12) for k in keys}
    values["wrap"] = secrets.token_hex(40)  # hf_ + 80 characters, wrapped at 40 columns
    return values


def _wrapped_lines(v: Mapping[str, str]) -> List[str]:
    """Log lines with secrets a line break splits, and cookie headers."""
    wrap = "hf_" + v["wrap"]
    return [
        "step 1 loss 2.5",
        "request headers: Authorization: Bearer",
        v["bearer"],
        f"key: {wrap[:35]}",  # 40 columns, then 40, then the rest: a terminal's wrap
        wrap[35:75],
        wrap[75:] + " loaded",
        "launching with --api-key",
        v["flagnext"],
        f"learned value split: {v['learned'][:12]}",
        f"{v['learned'][12:]} (from the environment)",
        "db password:",
        f"    {v['pw']}",
        f"Cookie: a=1; theme={v['cookie']}; _xsrf={v['xsrf']}",
        f"< Set-Cookie: prefs={v['setc']}; Path=/; HttpOnly",
        "step 2 loss 2.4",
    ]


def _pieces(v: Mapping[str, str]) -> Dict[str, str]:
    """Every value, and every piece of one that a break split (8+ characters)."""
    wrap = "hf_" + v["wrap"]
    out = {k: val for k, val in v.items() if k != "wrap"}
    out.update({"wrap 1": wrap[5:35], "wrap 2": wrap[35:75], "wrap 3": wrap[75:]})
    out.update({"learned 1": v["learned"][:12], "learned 2": v["learned"][12:]})
    return out


PRINTER = r"""
import os, sys, time
sys.stdout.write(os.environ['PLANT_LOG_SRC'][::-1].replace('\x1e', '\n') + '\n')
sys.stdout.flush()
time.sleep(float(sys.argv[1]))
"""


def test_lines_wrapped_and_cookies_are_redacted_in_scrub_lines() -> None:
    v = _line_plants()
    r = Redactor()
    r.add_environ({"SERVICE_SECRET": v["learned"]})
    lines = _wrapped_lines(v)
    out = "\n".join(r.scrub_lines(lines))
    assert not _leaks(_pieces(v), "scrub_lines", out), out
    assert not _leaks(_pieces(v), "scrub", r.scrub("\n".join(lines)))
    kept = r.scrub_lines(lines)
    assert kept[0] == "step 1 loss 2.5" and kept[-1] == "step 2 loss 2.4"
    assert kept[5].endswith(" loaded") and "(from the environment)" in kept[9]


@pytest.mark.slow
def test_wrapped_lines_and_cookies_leak_nowhere(spawn: Any, tmp_path: Path) -> None:
    """The same lines through ``diag watch -- CMD`` (its launch log, journal and reports)
    and ``diag capture --log`` of a running job (its files, --json, MCP summary)."""
    v = _line_plants()
    planted = _pieces(v)
    packed = "\x1e".join(_wrapped_lines(v))[::-1]
    env = {"SERVICE_SECRET": v["learned"], "PLANT_LOG_SRC": packed}
    watched = tmp_path / "watch"
    watched.mkdir()
    done = run_diag(
        ["watch", "--interval", "0.5", "-o", str(watched / "run.html"), "--",
         sys.executable, "-c", PRINTER, "3"],
        env={**os.environ, **env},
        timeout_s=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # Its stdout is the job's own output, passed to its terminal as the job wrote it; diag's
    # are the files and its stderr.
    assert v["bearer"] in done.stdout  # the job printed them: not vacuous
    texts = {"watch stderr": done.stderr}
    texts.update({p.name: p.read_text(errors="replace") for p in watched.iterdir() if p.is_file()})
    assert {"run.log", "run.jsonl", "run.json", "run.html", "run.md"} <= set(texts), texts
    assert "step 2 loss 2.4" in texts["run.log"] and "Cookie: " in texts["run.log"]

    log = tmp_path / "job.log"
    job = spawn(
        [sys.executable, str(PROGRAMS / "secret_title.py"), "trainer --epochs 3"],
        env={**env, "RANK": "0", "PLANT_LOG": str(log)},
    )
    out = tmp_path / "out"
    out.mkdir()
    captured = run_diag(
        ["capture", "--pid", str(job.pid), "--count", "2", "--interval", "0.3", "--json",
         "--log", str(log), "-o", str(out / "run")],
        cwd=out,
        timeout_s=300,
    )  # fmt: skip
    assert captured.returncode in (0, 10), captured.stderr
    texts.update({"capture --json": captured.stdout, "capture stderr": captured.stderr})
    texts.update({f"capture {p.name}": p.read_text(errors="replace") for p in out.iterdir()})
    assert "request headers: Authorization:" in texts["capture run.json"]
    pytest.importorskip("pydantic")
    from diag.mcp.server import Tools

    summary = Tools(tmp_path / "mcp").summary(str(out / "run.json"))
    texts["MCP summary"] = json.dumps(summary, ensure_ascii=False)
    assert not _all_leaks(planted, texts), _all_leaks(planted, texts)


def test_a_slow_streamed_read_that_moves_on_is_not_a_hang() -> None:
    """``bounded_reads`` times a stall from the last piece a streaming reader got back."""
    from diag.probes.bounded_reads import Read, read_all

    def slow(path: str, max_bytes: int, progress: Any) -> bytes:
        for _ in range(4):
            time.sleep(0.15)
            progress()
        return b"done"

    done = read_all([Read("/nonexistent", 8, slow)], stall_s=0.4)
    assert done.data == [b"done"] and done.hung == ()
