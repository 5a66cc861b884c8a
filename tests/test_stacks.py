"""The stacks probe: recorded py-spy dumps, the join to OS threads, and every failure reason.

Recordings (tests/data/pyspy/pyXY_{blocking,nonblocking}.json) are real ``py-spy dump --json``
output of tests/data/pyspy/threads_program.py under CPython 3.9-3.13; the live tests run the
same program under the venv's Python and, when pyenv has it, 3.9.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from diag.model import Frame, ThreadSample
from diag.probes.procfs import ProcFS
from diag.probes.stacks import (
    KIND_ERROR,
    KIND_GONE,
    KIND_MISSING,
    KIND_NOT_PYTHON,
    KIND_PERMISSION,
    KIND_TIMEOUT,
    KIND_ZOMBIE,
    PyThreadDump,
    StackError,
    classify_failure,
    dump_stacks,
    find_pyspy,
    join_stacks,
    parse_pyspy_json,
    python_version_of,
    stack_id,
)
from tests.conftest import Started

DATA = Path(__file__).parent / "data" / "pyspy"
PROGRAM = DATA / "threads_program.py"
ODD_NAME = 'odd "name") \u00e9\u2603\tend'
VERSIONS = ("39", "310", "311", "312", "313")
PY39 = Path("/root/.pyenv/versions/3.9.18/bin/python")


def _load(name: str) -> List[PyThreadDump]:
    return parse_pyspy_json((DATA / name).read_text(encoding="utf-8"))


def _by_name(dumps: List[PyThreadDump]) -> Dict[Optional[str], PyThreadDump]:
    return {d.thread_name: d for d in dumps}


def _ready_tids(line: str) -> Dict[str, int]:
    """Parse the program's ``READY 'name'=tid ...`` line (names are Python reprs)."""
    pairs = re.findall(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")=(\d+)""", line)
    return {ast.literal_eval(name): int(tid) for name, tid in pairs}


# -- recorded dumps ------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_recorded_blocking_dump_parses_every_thread(version: str) -> None:
    dumps = _by_name(_load(f"py{version}_blocking.json"))
    assert set(dumps) == {
        "MainThread",
        "lock_waiter_1",
        "lock_waiter_2",
        "idle_event_waiter",
        ODD_NAME,
    }
    ready = _ready_tids((DATA / f"py{version}_ready.txt").read_text(encoding="utf-8"))
    for name, dump in dumps.items():
        assert dump.os_thread_id == ready[name or ""]
        assert dump.active is False and dump.owns_gil is False  # all parked
    main = dumps["MainThread"]
    assert main.frames[0].name == "main_sleeper"  # innermost first
    assert main.frames[-1].name == "<module>"
    assert main.frames[0].filename.endswith("threads_program.py") and main.frames[0].line > 0
    assert dumps["lock_waiter_1"].frames[0].name == "lock_waiter"
    assert dumps["idle_event_waiter"].frames[0].name.endswith("wait")


@pytest.mark.parametrize("version", ["39", "310"])
def test_nonblocking_before_311_has_no_os_thread_ids(version: str) -> None:
    """Why diag dumps blocking below 3.11: no OS ids, and parked threads read as active."""
    dumps = _load(f"py{version}_nonblocking.json")
    assert all(d.os_thread_id is None for d in dumps)
    assert _by_name(dumps)["lock_waiter_1"].active is True


@pytest.mark.parametrize("version", ["311", "312", "313"])
def test_nonblocking_from_311_matches_blocking(version: str) -> None:
    blocking = _load(f"py{version}_blocking.json")
    nonblocking = _load(f"py{version}_nonblocking.json")
    assert blocking == nonblocking


def test_stack_ids_group_identical_stacks_and_differ_otherwise() -> None:
    dumps = _by_name(_load("py311_blocking.json"))
    ids = {name: stack_id(d.frames) for name, d in dumps.items()}
    assert ids["lock_waiter_1"] == ids["lock_waiter_2"]
    assert ids["lock_waiter_1"] != ids["idle_event_waiter"] != ids["MainThread"]
    assert len(ids["MainThread"]) == 16
    # Stable: a pure function of the frames (the same in any process, on any machine).
    frames = (Frame(name="f", filename="/a.py", line=3),)
    assert stack_id(frames) == stack_id((Frame(name="f", filename="/a.py", line=3),))
    assert stack_id(frames) != stack_id((Frame(name="f", filename="/a.py", line=4),))


def test_parse_tolerates_missing_fields_and_rejects_garbage() -> None:
    dumps = parse_pyspy_json('[{"thread_id": 7, "frames": [{"name": "f", "line": null}]}]')
    assert dumps == [PyThreadDump(None, 7, None, False, False, (Frame(name="f"),))]
    assert parse_pyspy_json("[]") == []
    with pytest.raises(StackError) as err:
        parse_pyspy_json("Error: something\n")
    assert err.value.kind == KIND_ERROR


# -- join ----------------------------------------------------------------------------------


def _dump(name: str, os_id: Optional[int], fn: str = "f") -> PyThreadDump:
    return PyThreadDump(os_id, 1, name, False, False, (Frame(name=fn, filename="/x.py", line=1),))


def test_join_by_os_thread_id_and_intern_stacks() -> None:
    threads = (ThreadSample(tid=100, name="python"), ThreadSample(tid=101, name="cuda-EvtHandlr"))
    joined, stacks = join_stacks(threads, [_dump("MainThread", 100, "step")], pid=100)
    assert joined[0].py_thread_name == "MainThread" and joined[0].stack_id in stacks
    assert stacks[joined[0].stack_id or ""].frames[0].name == "step"
    assert joined[0].py_active is False and joined[0].owns_gil is False
    assert joined[1].stack_id is None  # native thread untouched


def test_join_without_os_ids_main_thread_then_unique_comm_name() -> None:
    threads = (
        ThreadSample(tid=100, name="python"),
        ThreadSample(tid=101, name="loader"),
        ThreadSample(tid=102, name="python"),
        ThreadSample(tid=103, name="python"),
    )
    dumps = [
        _dump("MainThread", None, "a"),
        _dump("loader", None, "b"),
        _dump("Thread-1", None, "c"),
    ]
    joined, stacks = join_stacks(threads, dumps, pid=100)
    by_tid = {t.tid: t for t in joined}
    assert by_tid[100].py_thread_name == "MainThread"
    assert by_tid[101].py_thread_name == "loader"
    # Thread-1 matches no OS thread unambiguously: kept on a placeholder with a negative tid.
    placeholder = [t for t in joined if t.tid < 0]
    assert len(placeholder) == 1 and placeholder[0].py_thread_name == "Thread-1"
    assert placeholder[0].state == "?" and placeholder[0].stack_id in stacks
    assert len(stacks) == 3


def test_join_keeps_a_thread_py_spy_saw_but_proc_did_not() -> None:
    threads = (ThreadSample(tid=100, name="python"),)
    joined, _ = join_stacks(threads, [_dump("late", 105)], pid=100)
    assert [t.tid for t in joined] == [100, 105]
    assert joined[1].state == "?" and joined[1].py_thread_name == "late"


def test_join_ambiguous_names_are_not_guessed() -> None:
    threads = (ThreadSample(tid=100, name="w"), ThreadSample(tid=101, name="w"))
    joined, _ = join_stacks(threads, [_dump("w", None)], pid=None)
    assert joined[0].stack_id is None and joined[1].stack_id is None
    assert joined[2].tid == -1


# -- failure reasons from recorded stderr --------------------------------------------------


def _fake_proc(root: Path, pid: int, state: Optional[str]) -> ProcFS:
    if state is not None:
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(f"{pid} (a) b) {state} 1 2 3\n")
    return ProcFS(root)


@pytest.mark.parametrize(
    ("recording", "state", "kind"),
    [
        ("not_python.txt", "S", KIND_NOT_PYTHON),
        ("no_such_pid.txt", None, KIND_GONE),
        ("no_such_pid.txt", "Z", KIND_ZOMBIE),
        ("permission_nonroot.txt", "S", KIND_PERMISSION),
        ("permission_root_exe.txt", "S", KIND_PERMISSION),
        ("permission_root_no_cap.txt", "S", KIND_PERMISSION),
    ],
)
def test_classify_recorded_pyspy_errors(
    tmp_path: Path, recording: str, state: Optional[str], kind: str
) -> None:
    stderr = (DATA / "errors" / recording).read_text()
    err = classify_failure(stderr, 4242, _fake_proc(tmp_path, 4242, state))
    assert err.kind == kind
    assert "\n" not in str(err) and "4242" in str(err)
    if kind == KIND_PERMISSION:
        assert "CAP_SYS_PTRACE" in str(err)


def test_classify_unknown_error_keeps_py_spys_first_line(tmp_path: Path) -> None:
    stderr = "Error: Failed to copy PyCodeObject\n\nCaused by:\n    0: Bad address (os error 14)\n"
    err = classify_failure(stderr, 7, _fake_proc(tmp_path, 7, "S"))
    assert err.kind == KIND_ERROR
    assert (
        str(err)
        == "py-spy failed on pid 7: Error: Failed to copy PyCodeObject 0: Bad address (os error 14)"
    )


def test_python_version_from_exe_name_or_libpython(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    os.symlink("/usr/bin/python3.10", tmp_path / "1" / "exe")
    (tmp_path / "2").mkdir()
    os.symlink("/opt/app/bin/server", tmp_path / "2" / "exe")
    (tmp_path / "2" / "maps").write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/libpython3.9.so.1.0\n")
    (tmp_path / "3").mkdir()
    fs = ProcFS(tmp_path)
    assert python_version_of(1, fs) == (3, 10)
    assert python_version_of(2, fs) == (3, 9)
    assert python_version_of(3, fs) is None


# -- live processes ------------------------------------------------------------------------


def _pyspy() -> str:
    found = find_pyspy()
    if found is None:
        pytest.skip("py-spy not installed")
    return found


def _interpreters() -> List[str]:
    out = [sys.executable]
    if PY39.exists():
        out.append(str(PY39))
    return out


@pytest.mark.parametrize("python", _interpreters())
def test_live_dump_joins_named_threads_to_their_os_tids(spawn: Any, python: str) -> None:
    target: Started = spawn([python, "-u", str(PROGRAM)])
    tids = _ready_tids(target.lines[-1])
    procfs = ProcFS()
    threads = tuple(
        ThreadSample(tid=t, name=procfs.read_task_text(target.pid, t, "comm").strip())
        for t in procfs.tids(target.pid)
    )
    dumps = dump_stacks(target.pid, 20.0, _pyspy())
    joined, stacks = join_stacks(threads, dumps, pid=target.pid)
    by_tid = {t.tid: t for t in joined}
    assert all(t.tid > 0 for t in joined)  # every Python thread found its OS thread
    for name in ("lock_waiter_1", "lock_waiter_2", "idle_event_waiter", ODD_NAME, "MainThread"):
        assert by_tid[tids[name]].py_thread_name == name
    waiter = by_tid[tids["lock_waiter_1"]]
    assert waiter.stack_id == by_tid[tids["lock_waiter_2"]].stack_id
    assert stacks[waiter.stack_id or ""].frames[0].name == "lock_waiter"
    assert waiter.py_active is False
    main = by_tid[target.pid]
    assert stacks[main.stack_id or ""].frames[0].name == "main_sleeper"


@pytest.mark.skipif(not PY39.exists(), reason="needs pyenv's Python 3.9")
def test_unknown_version_falls_back_to_blocking_for_os_ids(spawn: Any, tmp_path: Path) -> None:
    """An empty /proc root hides the version: non-blocking first, then blocking for the ids."""
    target: Started = spawn([str(PY39), "-u", str(PROGRAM)])
    dumps = dump_stacks(target.pid, 20.0, _pyspy(), procfs=ProcFS(tmp_path))
    assert dumps and all(d.os_thread_id is not None for d in dumps)


def test_non_python_process(spawn: Any) -> None:
    target: Started = spawn(["sh", "-c", "echo READY; exec sleep 100"])
    with pytest.raises(StackError) as err:
        dump_stacks(target.pid, 20.0, _pyspy())
    assert err.value.kind == KIND_NOT_PYTHON
    assert str(err.value) == f"not a Python process (pid {target.pid})"


def test_dead_pid() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    with pytest.raises(StackError) as err:
        dump_stacks(proc.pid, 20.0, _pyspy())
    assert err.value.kind == KIND_GONE


def test_zombie(spawn: Any) -> None:
    code = (
        "import subprocess, time\n"
        "p = subprocess.Popen(['true'])\n"
        "while open(f'/proc/{p.pid}/stat').read().rsplit(')', 1)[1].split()[0] != 'Z':\n"
        "    time.sleep(0.01)\n"
        "print('READY', p.pid, flush=True)\n"
        "time.sleep(100)\n"
    )
    parent: Started = spawn([sys.executable, "-c", code])
    child = int(parent.lines[-1].split()[1])
    with pytest.raises(StackError) as err:
        dump_stacks(child, 20.0, _pyspy())
    assert err.value.kind == KIND_ZOMBIE


def test_hanging_py_spy_is_killed_at_the_timeout(tmp_path: Path, spawn: Any) -> None:
    target: Started = spawn(
        [sys.executable, "-c", "import time; print('READY', flush=True); time.sleep(100)"]
    )
    pidfile = tmp_path / "hung.pid"
    fake = tmp_path / "py-spy"
    fake.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pidfile}\nwait\n")
    fake.chmod(0o755)
    with pytest.raises(StackError) as err:
        dump_stacks(target.pid, 0.5, str(fake))
    assert err.value.kind == KIND_TIMEOUT and "timed out after 0.5s" in str(err.value)
    hung = int(pidfile.read_text())
    assert _gone_or_zombie(hung), "the hung py-spy's child survived the kill"


def _gone_or_zombie(pid: int) -> bool:
    for _ in range(500):  # wait for the kernel to deliver SIGKILL to the group
        state = ProcFS().try_read_text(pid, "stat")
        if state is None or state.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        time.sleep(0.01)
    return False


def test_empty_output_of_an_exited_target_reads_as_gone(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    fake = tmp_path / "py-spy"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    with pytest.raises(StackError) as err:
        dump_stacks(proc.pid, 5.0, str(fake))
    assert err.value.kind == KIND_GONE


def test_missing_py_spy(tmp_path: Path) -> None:
    with pytest.raises(StackError) as err:
        dump_stacks(os.getpid(), 5.0, str(tmp_path / "no-py-spy"))
    assert err.value.kind == KIND_MISSING


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv"
)
def test_permission_denied_as_another_user(spawn: Any) -> None:
    """py-spy run as nobody against a root-owned Python: the permission reason, not a crash."""
    target: Started = spawn(
        [sys.executable, "-c", "import time; print('READY', flush=True); time.sleep(100)"]
    )
    bindir = Path(tempfile.mkdtemp(prefix="diag-pyspy-"))
    try:
        bindir.chmod(0o755)
        copy = bindir / "py-spy-real"
        shutil.copy2(_pyspy(), copy)
        copy.chmod(0o755)
        wrapper = bindir / "py-spy"
        wrapper.write_text(
            f'#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups {copy} "$@"\n'
        )
        wrapper.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        with pytest.raises(StackError) as err:
            dump_stacks(target.pid, 20.0, str(wrapper))
        assert err.value.kind == KIND_PERMISSION
    finally:
        shutil.rmtree(bindir, ignore_errors=True)


def test_pyspy_version_from_dist_info_matches_its_own_answer() -> None:
    """The version read from the dist-info name (no subprocess) is what py-spy says."""
    from diag.probes.host import pyspy_version

    pyspy = find_pyspy()
    assert pyspy is not None
    said = subprocess.run([pyspy, "--version"], capture_output=True, text=True, check=True)
    assert pyspy_version(pyspy) == said.stdout.split()[-1]
