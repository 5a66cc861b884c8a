"""Python thread stacks from ``py-spy dump --json``, joined to the /proc thread records.

Blocking or not (measured here with py-spy 0.4.3 on CPython 3.9-3.13, recordings in
tests/data/pyspy/): ``--nonblocking`` reads the target's memory without pausing it, but on
Python < 3.11 it cannot map a Python thread to its OS thread (``os_thread_id`` is null) and,
without that, it cannot read the thread's /proc state either, so it reports blocked threads as
*active* - exactly the wrong answer for a hang detector. On 3.11+ both modes give identical
dumps. So: **non-blocking on Python >= 3.11, blocking below**; the version comes from the
target's executable name or its mapped ``libpythonX.Y``. When the version cannot be told
(an embedded interpreter, a renamed binary) diag tries non-blocking; whenever a non-blocking
dump has a thread without its OS thread id, it dumps again blocking. A blocking dump pauses the
target for a few milliseconds (about 8 ms at 64 threads, 100+ ms at 1,000); a non-blocking dump
that fails on an inconsistent read is retried once blocking.

py-spy has no timeout of its own and has hung in waitpid (#565, #732): it runs in its own
process group, and on timeout the whole group is killed (a killed tracer detaches, so the target
resumes). Failures become ``StackError``s whose message is one line with the reason (not a
Python process, permission, process gone or zombie, timeout, other) and whose ``kind`` lets the
sampler set ``py_status`` without parsing text.

Parsing py-spy's JSON and joining it to the /proc threads is pure and lives in
``diag.probes.pyspy_dump``; this module runs py-spy.

``read_python_stacks`` is what a sample calls: on CPython 3.11-3.13 it first reads the stacks
in-process (``diag.probes.cpython.pyframes``: the same non-blocking read, a fraction of
py-spy's cost) and uses py-spy for every other Python, for any read that fails or looks
inconsistent (tried three times: a running thread can tear a read), and always when asked for
``reader="py-spy"``.
"""

from __future__ import annotations

import ctypes
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, Tuple

import msgspec

from diag.probes.cpython.pyframes import FrameChainCorrupt, read_stacks
from diag.probes.cpython.pymem import NotCPython, RemoteReadError, maps_cpython
from diag.probes.procfs import ProcFS
from diag.probes.pyspy_dump import (
    KIND_ERROR,
    KIND_GONE,
    KIND_MISSING,
    KIND_NOT_PYTHON,
    KIND_PERMISSION,
    KIND_TIMEOUT,
    KIND_ZOMBIE,
    PyThreadDump,
    StackError,
    join_stacks,
    parse_pyspy_json,
    stack_id,
)
from diag.probes.threads import namespace_tids

# The parser and the join are re-exported: callers know them as part of this probe.
__all__ = [
    "KIND_ERROR",
    "KIND_GONE",
    "KIND_MISSING",
    "KIND_NOT_PYTHON",
    "KIND_PERMISSION",
    "KIND_TIMEOUT",
    "KIND_ZOMBIE",
    "PyThreadDump",
    "StackError",
    "classify_failure",
    "dump_stacks",
    "find_pyspy",
    "join_stacks",
    "parse_pyspy_json",
    "python_version_of",
    "read_python_stacks",
    "stack_id",
]


def find_pyspy() -> Optional[str]:
    """The venv's own py-spy (next to this Python) first, then the one on PATH."""
    local = Path(sys.executable).parent / "py-spy"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which("py-spy")


_VERSION_IN_NAME = re.compile(r"python(\d)\.(\d+)")
_LIBPYTHON = re.compile(r"libpython(\d)\.(\d+)")


def python_version_of(pid: int, procfs: ProcFS) -> Optional[Tuple[int, int]]:
    """(major, minor) from the exe name (python3.11) or a mapped libpython3.11.so; else None."""
    exe = procfs.readlink(pid, "exe") or ""
    match = _VERSION_IN_NAME.search(os.path.basename(exe))
    if match is None:
        maps = procfs.try_read_text(pid, "maps") or ""
        match = _LIBPYTHON.search(maps)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def _state_of(pid: int, procfs: ProcFS) -> Optional[str]:
    stat = procfs.try_read_text(pid, "stat")
    if not stat or ")" not in stat:
        return None
    rest = stat.rsplit(")", 1)[1].split()
    return rest[0] if rest else None


def traced_by(pid: int, procfs: ProcFS) -> Optional[str]:
    """ "already traced by PID N (strace) - detach it" when a debugger or tracer holds ``pid``
    (``TracerPid:`` in its status): a second ptrace attach fails with EPERM even as root."""
    status = procfs.try_read_text(pid, "status") or ""
    match = re.search(r"^TracerPid:\s*(\d+)", status, re.MULTILINE)
    if match is None or match.group(1) == "0":
        return None
    tracer = int(match.group(1))
    name = (procfs.try_read_text(tracer, "comm") or "").strip() or "a tracer"
    return (
        f"pid {pid} is already traced by PID {tracer} ({name}) - detach it "
        f"(quit the debugger, or kill {tracer}) and capture again"
    )


def classify_failure(stderr: str, pid: int, procfs: ProcFS) -> StackError:
    """Turn py-spy's stderr (and the process's current /proc state) into one clear reason."""
    state = _state_of(pid, procfs)
    if state is None and not procfs.path(pid).exists():
        return StackError(KIND_GONE, f"process {pid} exited before its stack could be read")
    if state == "Z":
        return StackError(KIND_ZOMBIE, f"process {pid} is a zombie (exited, not yet reaped)")
    text = stderr.lower()
    tracer = traced_by(pid, procfs)
    if tracer is not None and ("permission denied" in text or "not permitted" in text):
        return StackError(KIND_PERMISSION, tracer)
    if "failed to find python version" in text or "failed to find a python interpreter" in text:
        return StackError(KIND_NOT_PYTHON, f"not a Python process (pid {pid})")
    if "permission denied" in text or "operation not permitted" in text:
        return StackError(
            KIND_PERMISSION,
            f"permission denied reading pid {pid}: py-spy needs root or CAP_SYS_PTRACE "
            "(docker/k8s: add the SYS_PTRACE capability)",
        )
    if "no such process" in text or "no such file or directory" in text:
        return StackError(KIND_GONE, f"process {pid} exited before its stack could be read")
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    first = next((ln for ln in lines if ln.startswith("Error:")), lines[0] if lines else "")
    causes = [ln for ln in lines if re.match(r"^(\d+:|Reason:)", ln)]
    detail = " ".join([first, *causes[:1]]).strip() or "no message"
    return StackError(KIND_ERROR, f"py-spy failed on pid {pid}: {detail[:300]}")


# py-spy prints what the target holds (names, file names): its output is read up to this,
# then py-spy is killed and the dump refused (64 MiB: ~4,000 threads x 512 frames of 4 KiB
# names would not fit, nor would any real job's dump need it).
MAX_PYSPY_OUTPUT_BYTES = 64 << 20
_MAX_PYSPY_STDERR_BYTES = 64 << 10
_PR_SET_PDEATHSIG = 1
_libc: Optional[ctypes.CDLL] = None


def _die_with_parent() -> None:
    """In the py-spy child before exec: SIGKILL it when diag (the forking thread) dies, so
    a killed diag never leaves a py-spy attached to a rank (which would stay paused)."""
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _load_libc() -> None:
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            _libc = None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _read_bounded(
    proc: subprocess.Popen[bytes], deadline: float, max_out: int
) -> Tuple[bytes, bytes, Optional[str]]:
    """stdout and stderr of ``proc`` until both close: (out, err, why it was cut short)."""
    assert proc.stdout is not None and proc.stderr is not None
    streams = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    limits = {proc.stdout.fileno(): max_out, proc.stderr.fileno(): _MAX_PYSPY_STDERR_BYTES}
    with selectors.DefaultSelector() as sel:
        for fd in streams:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return bytes(streams[proc.stdout.fileno()]), b"", "timeout"
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                buf = streams[key.fd]
                room = limits[key.fd] - len(buf)
                buf += chunk[: max(room, 0)]
                if len(chunk) > room:
                    if key.fd == proc.stdout.fileno():
                        return bytes(buf), bytes(streams[proc.stderr.fileno()]), "too-big"
                    sel.unregister(key.fd)  # stderr beyond its cap: only the head matters
    return bytes(streams[proc.stdout.fileno()]), bytes(streams[proc.stderr.fileno()]), None


def _run_pyspy(pyspy: str, pid: int, nonblocking: bool, timeout_s: float) -> Tuple[int, str, str]:
    argv = [pyspy, "dump", "--pid", str(pid), "--json"]
    if nonblocking:
        argv.append("--nonblocking")
    env = dict(os.environ, RUST_BACKTRACE="0", RUST_LOG="error")
    _load_libc()
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # only prctl: safe between fork and exec
        )
    except OSError as exc:
        raise StackError(
            KIND_MISSING, f"cannot run py-spy at {pyspy}: {exc.strerror or exc}"
        ) from exc
    try:
        out, err, cut = _read_bounded(
            proc, time.monotonic() + max(timeout_s, 0.05), MAX_PYSPY_OUTPUT_BYTES
        )
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    if cut is not None:
        _kill_group(proc)
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pass
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
        if cut == "timeout":
            raise StackError(
                KIND_TIMEOUT, f"py-spy timed out after {timeout_s:g}s on pid {pid} (killed)"
            )
        raise StackError(
            KIND_ERROR,
            f"truncated: py-spy printed over {MAX_PYSPY_OUTPUT_BYTES >> 20} MiB for pid {pid} "
            "(killed; its stacks are not shown)",
        )
    proc.wait()
    proc.stdout.close()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _torn_not_python(error: StackError, stderr: str, pid: int) -> StackError:
    """py-spy's "not a Python process" about a process known to run CPython: its search for the
    interpreter read the running process mid-change (``Failed to find a python interpreter in
    the .data section``, 1 dump in ~130 of a busy-polling SGLang scheduler) - an error, retried
    blocking, never the fact "not Python" (which dropped the sample's stacks without a word)."""
    if error.kind != KIND_NOT_PYTHON:
        return error
    said = next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "no message")
    return StackError(KIND_ERROR, f"py-spy failed on pid {pid}: {said[:300]} (a torn read)")


def dump_stacks(
    pid: int,
    timeout_s: float,
    pyspy: str,
    procfs: Optional[ProcFS] = None,
    cpython: bool = False,
) -> List[PyThreadDump]:
    """Dump every Python thread of ``pid`` within ``timeout_s``; raises ``StackError``.
    ``cpython``: the process is known to run CPython (diag's reader found it)."""
    fs = procfs or ProcFS()
    deadline = time.monotonic() + timeout_s

    def failure(err: str) -> StackError:
        found = classify_failure(err, pid, fs)
        return _torn_not_python(found, err, pid) if cpython else found

    version = python_version_of(pid, fs)
    nonblocking = version is None or version >= (3, 11)
    rc, out, err = _run_pyspy(pyspy, pid, nonblocking, timeout_s)
    retry_blocking = False
    if nonblocking and rc == 0 and out.strip():
        # A dump without OS thread ids (Python < 3.11 behind an unknown version, or a build
        # py-spy cannot map) cannot be joined and misreads activity: dump again, blocking.
        threads = parse_pyspy_json(out)
        if all(t.os_thread_id is not None for t in threads):
            return threads
        retry_blocking = True
    elif nonblocking and rc != 0:
        # A torn non-blocking read gives an odd error; known reasons would only repeat.
        retry_blocking = failure(err).kind == KIND_ERROR
    remaining = deadline - time.monotonic()
    if retry_blocking and remaining > 0.05:
        rc, out, err = _run_pyspy(pyspy, pid, False, remaining)
    if rc != 0 or not out.strip():  # empty output: the target exited during the dump
        raise failure(err)
    return parse_pyspy_json(out)


READER_DIAG = "diag"
READER_PYSPY = "py-spy"
_IN_PROCESS_TRIES = 3


def read_python_stacks(
    pid: int,
    timeout_s: float,
    pyspy: str,
    procfs: Optional[ProcFS] = None,
    reader: str = "auto",
    activity: bool = True,
) -> Tuple[List[PyThreadDump], str]:
    """Every Python thread's stack of ``pid`` and which reader gave it ("diag" or "py-spy").

    ``activity=False``: the caller reads the threads' states itself (diag's reader then leaves
    ``active`` False instead of reading every thread's stat).
    """
    fs = procfs or ProcFS()
    torn = False  # diag's reader placed a CPython and tore on it: py-spy cannot say "not Python"
    if reader != READER_PYSPY:
        corrupt = 0
        for _ in range(_IN_PROCESS_TRIES):
            try:
                dumps = read_stacks(fs, pid, activity)
            except NotCPython:
                raise StackError(KIND_NOT_PYTHON, f"not a Python process (pid {pid})") from None
            except FrameChainCorrupt:
                corrupt += 1
                torn = True
                continue
            except RemoteReadError:
                torn = True
                continue
            if dumps is None:
                break  # not a Python this reader knows: py-spy's job
            return dumps, READER_DIAG
        if corrupt == _IN_PROCESS_TRIES:  # not a torn read: py-spy would walk it too
            raise StackError(
                KIND_ERROR,
                f"pid {pid}: Python frame chain cyclic/corrupt (loops or never ends, "
                f"{_IN_PROCESS_TRIES} reads); its stacks are not shown",
            )
    dumps = dump_stacks(pid, timeout_s, pyspy, fs, cpython=torn and maps_cpython(fs, pid))
    inner = namespace_tids(fs, pid)  # py-spy gives a container's own thread ids
    if inner:
        dumps = [
            msgspec.structs.replace(d, os_thread_id=inner.get(d.os_thread_id, d.os_thread_id))
            if d.os_thread_id is not None
            else d
            for d in dumps
        ]
    return dumps, READER_PYSPY
