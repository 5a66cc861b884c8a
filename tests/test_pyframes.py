"""diag's in-process stack reader against the real thing: CPython's headers, CPython's own line
numbers, and py-spy's dumps of real processes on every CPython 3.11-3.13 on this machine.

The interpreters are pyenv's (this image has 3.9-3.13); a Python this machine lacks is listed
as skipped with its path, not passed.
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import os
import re
import subprocess
import sys
import sysconfig
import time
import types
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from conftest import PROGRAMS

from diag.probes.cpython.elf_symbols import dynamic_symbols, load_base, mapped_python
from diag.probes.cpython.layouts import LAYOUTS
from diag.probes.cpython.linetable import line_of
from diag.probes.cpython.pyframes import read_stacks
from diag.probes.cpython.pymem import NotCPython, RemoteMemory, RemoteReadError, locate_runtime
from diag.probes.procfs import ProcFS
from diag.probes.stacks import (
    KIND_NOT_PYTHON,
    StackError,
    dump_stacks,
    find_pyspy,
    read_python_stacks,
)

DATA = Path(__file__).resolve().parent / "data"
PYENV = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"


def _interpreter(minor: int) -> Optional[str]:
    found = sorted(glob.glob(str(PYENV / f"3.{minor}.*" / "bin" / f"python3.{minor}")))
    if found:
        return found[-1]
    if sys.version_info[:2] == (3, minor):
        return sys.executable
    return None


def _need(minor: int) -> str:
    exe = _interpreter(minor)
    if exe is None:
        pytest.skip(f"no CPython 3.{minor} under {PYENV}")
    return exe


def _pyspy() -> str:
    path = find_pyspy()
    assert path is not None, "py-spy is a dependency of diag"
    return path


# -- struct offsets ------------------------------------------------------------------------------


def _headers() -> Iterator[Tuple[Tuple[int, int], Path]]:
    for version in LAYOUTS:
        tag = f"python{version[0]}.{version[1]}"
        for inc in sorted(PYENV.glob(f"*/include/{tag}")):
            if (inc / "internal").is_dir():
                yield version, inc
                break


def test_the_running_pythons_headers_are_there() -> None:
    """The offsets test below must not pass by finding nothing to compare."""
    assert sys.version_info[:2] in LAYOUTS
    assert (
        any(v == sys.version_info[:2] for v, _ in _headers())
        or Path(sysconfig.get_paths()["include"], "internal").is_dir()
    )


@pytest.mark.parametrize("version", sorted(LAYOUTS))
def test_layout_matches_offsetof_from_the_headers(version: Tuple[int, int], tmp_path: Path) -> None:
    headers = dict(_headers())
    if version not in headers:
        pytest.skip(f"no internal headers of CPython {version} under {PYENV}")
    inc = headers[version]
    exe = tmp_path / "offsets"
    subprocess.run(
        ["gcc", f"-I{inc}", f"-I{inc}/internal", str(DATA / "cpython_offsets.c"), "-o", str(exe)],
        check=True,
    )
    printed = dict(re.findall(r"(\w+)=(\d+),", subprocess.check_output([str(exe)], text=True)))
    layout = dataclasses.asdict(LAYOUTS[version])
    assert printed, "the offsets program printed nothing"
    assert {k: int(v) for k, v in printed.items()} == {k: layout[k] for k in printed}


# -- line numbers --------------------------------------------------------------------------------


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def test_line_numbers_match_cpythons_own_for_every_instruction() -> None:
    import asyncio.base_events
    import json.decoder
    import threading

    checked = 0
    for module in (threading, asyncio.base_events, json.decoder, sys.modules[__name__]):
        source = Path(module.__file__ or "").read_text()
        for code in _codes(compile(source, module.__file__ or "", "exec")):
            for start, end, line in code.co_lines():
                for unit in range(start // 2, end // 2):
                    assert line_of(code.co_linetable, code.co_firstlineno, unit) == line, (
                        code.co_name,
                        unit,
                    )
                    checked += 1
    assert checked > 10_000


# -- symbols and runtime -------------------------------------------------------------------------


def test_symbols_agree_with_nm_and_the_runtime_with_ctypes() -> None:
    maps = Path("/proc/self/maps").read_text()
    path = mapped_python(maps)[0]
    with open(path, "rb") as f:

        def read(offset: int, size: int) -> bytes:
            f.seek(offset)
            return f.read(size)

        symbols = dynamic_symbols(read, ["_PyRuntime", "PyCode_Type", "no_such_symbol"])
    assert symbols is not None
    nm = subprocess.check_output(["nm", "-D", "--defined-only", path], text=True)
    for name in ("_PyRuntime", "PyCode_Type"):
        (value,) = re.findall(rf"^([0-9a-f]+) \w {name}$", nm, re.M)
        assert symbols.values[name] == int(value, 16)
    assert "no_such_symbol" not in symbols.values

    with RemoteMemory(ProcFS(), os.getpid()) as memory:
        runtime = locate_runtime(ProcFS(), os.getpid(), memory)
    assert runtime is not None
    assert runtime.version == sys.version_info[:2]
    lib = ctypes.pythonapi
    assert runtime.runtime_addr == ctypes.addressof(ctypes.c_char.in_dll(lib, "_PyRuntime"))
    assert runtime.code_type_addr == id(types.CodeType)


def test_load_base_is_the_offset_zero_mapping_of_exactly_that_path() -> None:
    maps = (
        "7f0000001000-7f0000002000 r-xp 00001000 fe:00 11    /opt/lib/libpython3.12.so\n"
        "7f0000000000-7f0000001000 r--p 00000000 fe:00 11    /opt/lib/libpython3.12.so\n"
        "7e0000000000-7e0000001000 r--p 00000000 fe:00 12    /x/opt/lib/libpython3.12.so\n"
        "7d0000000000-7d0000001000 r--p 00000000 fe:00 13    /my dir/python3\n"
        "55aa00000000-55aa00001000 r--p 00000000 fe:00 14    /usr/bin/python3"
    )
    assert load_base(maps, "/opt/lib/libpython3.12.so") == 0x7F0000000000
    assert load_base(maps, "/x/opt/lib/libpython3.12.so") == 0x7E0000000000
    assert load_base(maps, "/my dir/python3") == 0x7D0000000000
    assert load_base(maps, "dir/python3") is None  # not a whole path
    assert load_base(maps, "/usr/bin/python3") == 0x55AA00000000  # last line, no newline
    assert load_base(maps, "/usr/bin/python") is None


# -- whole reads against py-spy ------------------------------------------------------------------


def _by_tid(dumps: List[Any]) -> Dict[int, Any]:
    return {d.os_thread_id: d for d in dumps}


def _settled(pid: int) -> None:
    """Wait until two reads in a row agree: the thread that printed READY is in its wait."""
    last = None
    for _ in range(50):
        now = [(d.os_thread_id, d.frames) for d in read_stacks(ProcFS(), pid) or []]
        if now == last:
            return
        last = now
        time.sleep(0.05)
    raise AssertionError("the target's stacks never settled")


@pytest.mark.parametrize("minor", [11, 12, 13])
def test_every_shape_reads_as_pyspy_reads_it(minor: int, spawn: Any) -> None:
    exe = _need(minor)
    target = spawn([exe, str(PROGRAMS / "stack_shapes.py"), "6"])
    _settled(target.pid)
    mine = read_stacks(ProcFS(), target.pid)
    theirs = dump_stacks(target.pid, 20.0, _pyspy())
    assert mine is not None
    assert len(mine) == 17  # main, 8 shapes, 6 parked, the subclass, the _thread one
    assert _by_tid(mine).keys() == _by_tid(theirs).keys()
    for tid, spy in _by_tid(theirs).items():
        ours = _by_tid(mine)[tid]
        assert ours.frames == spy.frames, tid
        assert (ours.thread_name, ours.thread_id, ours.owns_gil) == (
            spy.thread_name,
            spy.thread_id,
            spy.owns_gil,
        )
    names = {d.thread_name for d in mine}
    assert {"MainThread", "subclassed", "a-thread-name-" + "x" * 120} <= names
    frames = [f for d in mine for f in d.frames]
    assert any(f.filename.endswith("module_with_a_long_path.py") for f in frames)
    assert any("\U0001f600" in f.filename for f in frames)
    assert any(f.name == "attendre_\u00e9t\u00e9_\u5f85\u3064" for f in frames)
    assert max(len(d.frames) for d in mine) > 150


@pytest.mark.parametrize("minor", [9, 10])
def test_older_pythons_are_left_to_pyspy(minor: int, spawn: Any) -> None:
    exe = _need(minor)
    target = spawn([exe, str(DATA / "pyspy" / "threads_program.py")])
    assert read_stacks(ProcFS(), target.pid) is None
    dumps, reader = read_python_stacks(target.pid, 20.0, _pyspy())
    assert reader == "py-spy"
    assert all(d.os_thread_id for d in dumps) and len(dumps) == 5


def test_a_process_that_is_not_python_is_told_without_pyspy(spawn: Any, tmp_path: Path) -> None:
    target = spawn(["sh", "-c", "echo READY; exec sleep 600"])
    with pytest.raises(NotCPython):
        read_stacks(ProcFS(), target.pid)
    never = tmp_path / "py-spy-never-runs"
    with pytest.raises(StackError) as err:
        read_python_stacks(target.pid, 20.0, str(never))
    assert err.value.kind == KIND_NOT_PYTHON
    with pytest.raises(StackError) as err:  # py-spy, asked for, says the same
        read_python_stacks(target.pid, 20.0, _pyspy(), reader="py-spy")
    assert err.value.kind == KIND_NOT_PYTHON


def test_reader_can_be_forced_to_pyspy(spawn: Any) -> None:
    target = spawn([sys.executable, str(DATA / "pyspy" / "threads_program.py")])
    _settled(target.pid)
    auto, auto_reader = read_python_stacks(target.pid, 20.0, _pyspy())
    forced, forced_reader = read_python_stacks(target.pid, 20.0, _pyspy(), reader="py-spy")
    assert (auto_reader, forced_reader) == ("diag", "py-spy")

    def seen(dumps: List[Any]) -> List[Tuple[Any, ...]]:
        return sorted((d.os_thread_id, d.thread_id, d.thread_name, d.frames) for d in dumps)

    assert seen(auto) == seen(forced)


CHURN = """
import random, sys, threading
def spin(depth):
    if depth:
        return spin(depth - 1)
    return sum(range(random.randint(1, 2000)))
def worker():
    while True:
        spin(random.randint(0, 60))
def short_lived():
    while True:
        t = threading.Thread(target=spin, args=(random.randint(0, 30),))
        t.start()
        t.join()
for _ in range(3):
    threading.Thread(target=worker, daemon=True).start()
threading.Thread(target=short_lived, daemon=True).start()
print("READY", flush=True)
threading.Event().wait()
"""


def test_a_churning_process_never_gets_a_made_up_stack(spawn: Any) -> None:
    """Threads change their stacks and come and go under the read: every stack returned is one
    the program can have; a torn read is retried or handed to py-spy, never returned."""
    target = spawn([sys.executable, "-c", CHURN])
    allowed = {"spin", "worker", "short_lived", "<module>"}
    lines = len(CHURN.splitlines())
    readers = []
    for _ in range(60):
        try:
            dumps, reader = read_python_stacks(target.pid, 20.0, _pyspy())
        except StackError as exc:  # py-spy, after three torn reads, may give up: no stack
            readers.append(f"failed: {exc}")
            continue
        readers.append(reader)
        for dump in dumps:
            own = [f for f in dump.frames if f.filename == "<string>"]
            assert {f.name for f in own} <= allowed, own
            assert all(1 <= f.line <= lines for f in own), own
            assert sum(1 for f in own if f.name == "spin") <= 61
            assert dump.os_thread_id is not None
    assert readers.count("diag") >= 50, readers


@pytest.mark.parametrize("reader", ["auto", "py-spy"])
def test_a_process_in_its_own_pid_namespace_gets_the_thread_ids_listed_here(
    reader: str, spawn: Any
) -> None:
    """A container seen from the host: the target knows its threads as 1, 2, ...; /proc here
    lists other ids. Both readers give the ids /proc lists, so stacks join their threads."""
    program = str(DATA / "pyspy" / "threads_program.py")
    target = spawn(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, program])
    children = Path(f"/proc/{target.pid}/task/{target.pid}/children").read_text().split()
    python = [int(c) for c in children]  # unshare --fork: the program is its child
    (pid,) = python
    _settled(pid)
    dumps, who = read_python_stacks(pid, 20.0, _pyspy(), reader=reader)
    assert who == ("diag" if reader == "auto" else "py-spy")
    listed = {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    assert {d.os_thread_id for d in dumps} == listed
    names = {d.os_thread_id: d.thread_name for d in dumps}
    assert names[pid] == "MainThread"


@pytest.mark.parametrize("minor", [11, 12, 13])
def test_a_frame_link_read_mid_call_is_torn_not_an_empty_stack(
    minor: int, spawn: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread's head frame read while a call sets it up (3.11's new C frame before its
    ``current_frame`` is written; a generator's frame just suspended, its back link cleared)
    gives a chain that never reaches the frames its data stack holds: an empty or cut stack
    that read like a real one - an idle SGLang scheduler's main thread came back empty in 7%
    of reads, and its captures read "slow: CPU-bound in `MainThread`". Torn: read again."""
    import diag.probes.cpython.pyframes as pyframes

    target = spawn([_need(minor), str(DATA / "pyspy" / "threads_program.py")])
    _settled(target.pid)
    monkeypatch.setattr(pyframes.StackReader, "_current_frame", lambda self, raw: 0)
    with pytest.raises(RemoteReadError, match="torn"):
        read_stacks(ProcFS(), target.pid)
    dumps, reader = read_python_stacks(target.pid, 20.0, _pyspy())  # py-spy reads it instead
    assert reader == "py-spy" and all(d.frames for d in dumps)


def test_py_spy_s_not_python_about_a_torn_cpython_is_an_error(
    spawn: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """diag's reader placed the CPython and tore on it three times; py-spy, then, failed to find
    the interpreter in the .data section (its own torn read of a busy-polling SGLang scheduler,
    1 dump in ~130): an error, retried blocking - not "not a Python process", which dropped that
    sample's stacks with a note saying the scheduler was not Python."""
    import diag.probes.stacks as stacks

    target = spawn([sys.executable, str(DATA / "pyspy" / "threads_program.py")])
    _settled(target.pid)

    def torn(*_: Any, **__: Any) -> None:
        raise RemoteReadError("object at 0x10 is not a code object")

    monkeypatch.setattr(stacks, "read_stacks", torn)
    runs = tmp_path / "runs"
    fake = tmp_path / "py-spy"
    fake.write_text(
        f'#!/bin/sh\necho "$@" >> {runs}\n'
        "echo 'Error: Failed to find a python interpreter in the .data section' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    with pytest.raises(StackError) as err:
        read_python_stacks(target.pid, 20.0, str(fake))
    assert err.value.kind == "error" and "torn" in str(err.value), err.value
    assert "--nonblocking" in runs.read_text().splitlines()[0]
    assert len(runs.read_text().splitlines()) == 2  # then blocking
    with pytest.raises(StackError) as err:  # asked of py-spy alone, its word stands
        read_python_stacks(target.pid, 20.0, str(fake), reader="py-spy")
    assert err.value.kind == KIND_NOT_PYTHON
