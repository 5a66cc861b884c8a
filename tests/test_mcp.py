"""``diag mcp`` driven by the MCP SDK's own client over stdio, as a coding agent drives it.

A real session: the client launches ``python -m diag mcp``, lists its tools, finds a real job
with ``list_jobs`` (no PID given), captures it, and reads the verdict; then ``summary`` of the
bundle it wrote and ``watch_status`` of a real ``diag watch``. A job with planted secrets shows
that nothing of them reaches the agent, and bad inputs come back as tool errors.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from conftest import DIAG, NOBODY, PROGRAMS, as_nobody

mcp = pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")
jsonschema = pytest.importorskip("jsonschema")

from mcp import Client, StdioServerParameters  # noqa: E402

from diag.commands.machine_json import json_schema  # noqa: E402

SECRET = "hf_PlantedMcpSecret0123456789abcdef"
STATES = {"progressing", "slow", "idle", "deadlocked", "exited", "unknown"}


def _params(out_dir: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "diag", "mcp", "--out-dir", str(out_dir)]
    )


def _doc(result: Any) -> Dict[str, Any]:
    assert not result.is_error, result.content
    text = "".join(getattr(block, "text", "") for block in result.content)
    assert SECRET not in text
    structured = result.structured_content
    doc: Dict[str, Any] = structured if structured and "kind" in structured else json.loads(text)
    assert SECRET not in json.dumps(doc)
    return doc


def _session(out_dir: Path, calls: List[Tuple[str, Dict[str, Any]]]) -> Tuple[Any, List[Any]]:
    """Open one client session, list the tools, make ``calls`` in order."""

    async def main() -> Tuple[Any, List[Any]]:
        async with Client(_params(out_dir)) as client:
            tools = await client.list_tools()
            results = [await client.call_tool(name, args) for name, args in calls]
            return tools, results

    result: Tuple[Any, List[Any]] = anyio.run(main)
    return result


@pytest.mark.slow
def test_an_agent_finds_a_job_captures_it_and_reads_the_verdict(spawn: Any, tmp_path: Path) -> None:
    job = spawn(
        [sys.executable, str(PROGRAMS / "rank_job.py"), "2"],
        env={"HF_TOKEN": SECRET, "NCCL_DEBUG": "INFO"},
    )
    capture_args = {"pid": job.pid, "interval_s": 0.3, "count": 2}
    tools, (listed, captured, bad_pid, bad_count) = _session(
        tmp_path,
        [
            ("list_jobs", {}),
            ("capture", capture_args),
            ("capture", {"pid": 0}),
            ("capture", {"pid": job.pid, "count": 1000}),
        ],
    )
    by_name = {tool.name: tool for tool in tools.tools}
    assert set(by_name) == {"list_jobs", "capture", "summary", "watch_status"}
    assert "silent log" in by_name["capture"].description or "quiet log" in (
        by_name["capture"].description
    )
    assert "never kills or signals" in by_name["capture"].description
    assert by_name["capture"].input_schema["properties"]["count"]["maximum"] == 20
    jobs = _doc(listed)
    jsonschema.validate(jobs, json_schema())
    mine = [j for j in jobs["jobs"] if j["root_pid"] == job.pid]
    assert len(mine) == 1 and mine[0]["ranks"] == [0, 1]
    verdict = _doc(captured)
    jsonschema.validate(verdict, json_schema())
    assert verdict["kind"] == "capture" and verdict["target_pid"] == job.pid
    assert verdict["state"] in STATES and verdict["verdict"] and verdict["samples"] == 2
    assert verdict["ranks"] == [0, 1]
    bundle = Path(verdict["reports"]["json"])
    assert bundle.is_file() and bundle.parent == tmp_path
    assert SECRET not in bundle.read_text(encoding="utf-8")
    assert bad_pid.is_error and bad_count.is_error
    assert job.proc.poll() is None  # the job still runs: nothing killed it

    (summary,) = _session(tmp_path, [("summary", {"path": str(bundle)})])[1]
    doc = _doc(summary)
    assert doc["kind"] == "summary" and doc["state"] == verdict["state"]
    assert doc["rule"] == verdict["rule"]


@pytest.mark.slow
def test_watch_status_of_a_real_watch_running_then_ended(spawn: Any, tmp_path: Path) -> None:
    job = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "2"])
    out = tmp_path / "w"
    watch = subprocess.Popen(
        [*DIAG, "watch", "--pid", str(job.pid), "--interval", "0.5", "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not out.with_suffix(".json").exists():  # the live report: after a sample or two
            assert watch.poll() is None and time.monotonic() < deadline, watch.stderr
            time.sleep(0.1)
        _, (running,) = _session(tmp_path, [("watch_status", {"path": str(out) + ".html"})])
    finally:
        watch.send_signal(signal.SIGINT)  # diag watch's own stop: a final sample and report
        _, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    doc = _doc(running)
    jsonschema.validate(doc, json_schema())
    assert doc["kind"] == "watch_status" and doc["state"] in STATES
    assert doc["complete"] is False and any("still running" in n for n in doc["notes"])
    assert doc["target_pid"] == job.pid
    _, (ended, missing) = _session(
        tmp_path,
        [
            ("watch_status", {"path": str(out.with_suffix(".jsonl"))}),
            ("watch_status", {"path": str(tmp_path / "nothing.jsonl")}),
        ],
    )
    doc = _doc(ended)
    assert doc["complete"] is True  # the watch ended: its journal has its end line
    assert any("watch ended" in note for note in doc["notes"])
    assert missing.is_error


def _server_env(tmpdir: Path) -> Dict[str, str]:
    """The server's environment with ``TMPDIR`` at a shared directory the test controls (the
    host's real /tmp is shared with other tests) and no ``XDG_RUNTIME_DIR``."""
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = str(tmpdir)
    return env


def _default_session(env: Dict[str, str], calls: List[Tuple[str, Dict[str, Any]]]) -> List[Any]:
    """One session of ``diag mcp`` without ``--out-dir`` (the default output directory)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "diag", "mcp"], env=env)

    async def main() -> List[Any]:
        async with Client(params) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    results: List[Any] = anyio.run(main)
    return results


def _assert_private(report: Path, shared: Path) -> None:
    directory = report.parent
    st = directory.lstat()
    assert stat.S_ISDIR(st.st_mode) and not directory.is_symlink()
    assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert directory.parent == shared and directory.name != f"diag-mcp-{os.getuid()}"
    assert report.is_file() and report.stat().st_uid == os.geteuid()


@pytest.mark.slow
@pytest.mark.parametrize("squat", ["symlink", "file", "dir"])
def test_captures_go_to_a_private_dir_whatever_nobody_planted_at_the_old_path(
    spawn: Any, shared_tmp: Path, squat: str
) -> None:
    """The old default, ``$TMPDIR/diag-mcp-<uid>``, squatted by ``nobody`` (a symlink to their
    directory, a file, a directory of theirs): the capture still answers, its reports in a
    fresh 0700 directory of root's, and nothing reaches what nobody planted."""
    job = spawn([sys.executable, str(PROGRAMS / "exit_soon.py"), "60"])
    old = shared_tmp / f"diag-mcp-{os.getuid()}"
    theirs = shared_tmp / "theirs"
    as_nobody("mkdir", str(theirs))
    if squat == "symlink":
        as_nobody("ln", "-s", str(theirs), str(old))
    elif squat == "file":
        as_nobody("touch", str(old))
    else:
        as_nobody("mkdir", "-m", "0777", str(old))
    (captured,) = _default_session(
        _server_env(shared_tmp), [("capture", {"pid": job.pid, "interval_s": 0, "count": 1})]
    )
    verdict = _doc(captured)
    report = Path(verdict["reports"]["json"])
    _assert_private(report, shared_tmp)
    assert list(theirs.iterdir()) == []
    if squat == "dir":
        assert list(old.iterdir()) == []
    assert old.lstat().st_uid == NOBODY


@pytest.mark.slow
def test_an_unsafe_tmpdir_is_skipped_for_a_private_xdg_runtime_dir(
    spawn: Any, shared_tmp: Path, tmp_path: Path
) -> None:
    """``TMPDIR`` world-writable without the sticky bit (anyone could swap what is made there)
    is passed over for ``$XDG_RUNTIME_DIR``, private to this user: captures go there."""
    job = spawn([sys.executable, str(PROGRAMS / "exit_soon.py"), "60"])
    unsafe = shared_tmp / "ww"
    unsafe.mkdir()
    unsafe.chmod(0o777)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = dict(_server_env(unsafe), XDG_RUNTIME_DIR=str(runtime))
    once = {"pid": job.pid, "interval_s": 0, "count": 1}
    (captured,) = _default_session(env, [("capture", once)])
    _assert_private(Path(_doc(captured)["reports"]["json"]), runtime)
    assert list(unsafe.iterdir()) == []


@pytest.mark.slow
def test_two_concurrent_captures_of_one_job_answer_with_their_own_reports(
    spawn: Any, tmp_path: Path
) -> None:
    """Two captures of the same job sent at once, in one session (the server runs them side
    by side): each answer names its own files, both sets written, neither overwritten."""
    job = spawn([sys.executable, str(PROGRAMS / "exit_soon.py"), "120"])
    args = {"pid": job.pid, "interval_s": 1.0, "count": 2}

    async def main() -> List[Tuple[float, float, Any]]:
        timings: List[Tuple[float, float, Any]] = []
        async with Client(_params(tmp_path)) as client:

            async def one() -> None:
                start = time.monotonic()
                result = await client.call_tool("capture", args)
                timings.append((start, time.monotonic(), result))

            async with anyio.create_task_group() as group:
                group.start_soon(one)
                group.start_soon(one)
        return timings

    timings: List[Tuple[float, float, Any]] = anyio.run(main)
    (s1, e1, first), (s2, e2, second) = timings
    assert max(s1, s2) < min(e1, e2)  # they ran at the same time
    reports = [_doc(first)["reports"], _doc(second)["reports"]]
    assert reports[0]["json"] != reports[1]["json"]
    for kind in ("json", "html", "md"):
        paths = {Path(r[kind]) for r in reports}
        assert len(paths) == 2 and all(p.is_file() and p.parent == tmp_path for p in paths)
    loaded = [json.loads(Path(r["json"]).read_text()) for r in reports]
    assert all(len(doc["samples"]) == 2 for doc in loaded)


@pytest.mark.slow
def test_a_fifo_or_device_given_to_summary_or_watch_status_is_refused_at_once(
    tmp_path: Path,
) -> None:
    """``summary`` of a FIFO or /dev/zero, and ``watch_status`` of a watch whose journal is a
    FIFO (its report bundle a real one): one-line errors, in seconds - not a child blocked on
    the open until its 120 s deadline."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    golden = Path(__file__).parent / "golden" / "bundles" / "lock_waiters.json"
    (tmp_path / "w.json").write_bytes(golden.read_bytes())
    os.mkfifo(tmp_path / "w.jsonl")
    start = time.monotonic()
    _, results = _session(
        tmp_path,
        [
            ("summary", {"path": str(fifo)}),
            ("summary", {"path": "/dev/zero"}),
            ("watch_status", {"path": str(tmp_path / "w.html")}),
        ],
    )
    assert time.monotonic() - start < 30
    expected = ("FIFO", "character device", "FIFO")
    for result, word in zip(results, expected):
        assert result.is_error
        text = "".join(getattr(block, "text", "") for block in result.content)
        assert word in text and "\n" not in text.strip(), text


def _mentioning(text: str) -> List[int]:
    """PIDs of the processes whose argv mentions ``text`` (the server, its capture child)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in argv:
                pids.append(int(entry.name))
    return pids


def _wait_gone(text: str, timeout_s: float) -> float:
    """Seconds until no process mentions ``text`` (fails past ``timeout_s``)."""
    start = time.monotonic()
    while _mentioning(text):
        assert time.monotonic() - start < timeout_s, [
            (pid, Path(f"/proc/{pid}/cmdline").read_bytes()) for pid in _mentioning(text)
        ]
        time.sleep(0.2)
    return time.monotonic() - start


def _client_gone_mid_capture(spawn: Any, tmp_path: Path, mode: str) -> Tuple[Path, Any]:
    """A real SDK client (its own process) asks for a 20 s capture, then goes away as
    ``mode`` says, once the capture child is running."""
    job = spawn([sys.executable, str(PROGRAMS / "exit_soon.py"), "300"])
    out = tmp_path / "reports"
    client = subprocess.Popen(
        [sys.executable, str(PROGRAMS / "mcp_client.py"), str(out), str(job.pid), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert client.stdout is not None and "READY" in client.stdout.readline()
        deadline = time.monotonic() + 60
        while not any(f"-o {out}/" in " ".join(_argv(p)) for p in _mentioning(str(out))):
            assert time.monotonic() < deadline and client.poll() is None
            time.sleep(0.1)
        time.sleep(2.0)  # a sample or two taken
        if mode == "hang":
            client.kill()
        client.wait(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    return out, job


def _argv(pid: int) -> List[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _assert_clean_reports(out: Path) -> Dict[str, Any]:
    names = sorted(p.name for p in out.iterdir())
    assert not [n for n in names if n.startswith(".") or n.endswith(".tmp")], names
    bundles = [out / n for n in names if n.endswith(".json")]
    assert len(bundles) == 1, names
    assert {bundles[0].with_suffix(ext).name for ext in (".html", ".md")} <= set(names)
    doc: Dict[str, Any] = json.loads(bundles[0].read_text(encoding="utf-8"))
    return doc


@pytest.mark.slow
def test_a_client_killed_mid_capture_leaves_the_capture_to_finish(
    spawn: Any, tmp_path: Path
) -> None:
    """The client SIGKILLed: the server sees its stdin end. The capture runs its 20 samples
    to the end and writes its reports; then the server and the capture exit - no process, no
    temporary file left - and the job was never touched."""
    out, job = _client_gone_mid_capture(spawn, tmp_path, "hang")
    _wait_gone(str(out), timeout_s=120)
    doc = _assert_clean_reports(out)
    assert len(doc["samples"]) == 20
    assert job.proc.poll() is None


@pytest.mark.slow
def test_a_client_that_closes_mid_capture_stops_it_cleanly(spawn: Any, tmp_path: Path) -> None:
    """The client gives up on the answer and closes the session (the SDK closes the server's
    stdin, then SIGTERMs it): the capture is told as Ctrl-C would tell it, writes what it took
    and exits well before its 20 s - no process, no temporary file left, the job untouched."""
    out, job = _client_gone_mid_capture(spawn, tmp_path, "leave")
    _wait_gone(str(out), timeout_s=30)
    doc = _assert_clean_reports(out)
    assert 1 <= len(doc["samples"]) < 20
    assert job.proc.poll() is None


def test_an_out_dir_under_a_link_nobody_owns_is_refused_and_nothing_made_there(
    spawn: Any, shared_tmp: Path, tmp_path: Path
) -> None:
    """``--out-dir`` is made by handle under a checked parent: under another user's link it is
    refused in one line and nothing is created where the link points; a missing one in a
    safe place is made 0700 and used."""
    from mcp.server.mcpserver.exceptions import ToolError

    from diag.mcp.server import Tools

    job = spawn([sys.executable, str(PROGRAMS / "exit_soon.py"), "60"])
    theirs = shared_tmp / "theirs"
    as_nobody("mkdir", str(theirs))
    as_nobody("ln", "-s", str(theirs), str(shared_tmp / "link"))
    with pytest.raises(ToolError) as info:
        Tools(shared_tmp / "link" / "reports").capture(job.pid, 0.0, 1)
    assert f"symlink owned by uid {NOBODY}" in str(info.value)
    assert list(theirs.iterdir()) == []
    made = tmp_path / "reports"
    doc = Tools(made).capture(job.pid, 0.0, 1)
    assert Path(doc["reports"]["json"]).parent == made
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
