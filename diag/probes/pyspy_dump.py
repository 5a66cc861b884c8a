"""py-spy's ``dump --json`` -> ``PyThreadDump``s, joined onto the /proc thread records (pure).

No process is run here: the format knowledge (recorded dumps of CPython 3.9-3.13 in
tests/data/pyspy/) and the join rules are tested on text and records, and running py-spy
(blocking or not, timeouts, failure reasons) is ``diag.probes.stacks``. ``StackError`` and its
kinds live here because an unreadable dump is one of those failures.

Joining: a dump's thread goes to the /proc thread with the same OS thread id. A dump thread
without an id (or with an id /proc did not list) is matched, in order, to the thread-group
leader if it is ``MainThread`` (tid == pid), else to the one unclaimed OS thread whose 15-char
``comm`` equals its name (Python 3.14+ and many libraries name OS threads). If none matches,
its stack is still recorded on a placeholder ``ThreadSample``: with the OS id when py-spy gave
one (state ``?``: the thread started after /proc was read), else with a negative tid (-1, -2...)
meaning "OS thread unknown". Nothing py-spy saw is dropped.
"""

from __future__ import annotations

import hashlib
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

import msgspec

from diag.model import Frame, Stack, ThreadSample
from diag.probes.runner import ProbeError

# StackError.kind values; the sampler maps "not-python" to py_status "not-python".
KIND_NOT_PYTHON = "not-python"
KIND_PERMISSION = "permission"
KIND_GONE = "gone"
KIND_ZOMBIE = "zombie"
KIND_TIMEOUT = "timeout"
KIND_MISSING = "missing-py-spy"
KIND_ERROR = "error"


class StackError(ProbeError):
    """A dump that failed for a known reason; ``str()`` is the one-line reason."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class PyThreadDump(msgspec.Struct, frozen=True):
    """One Python thread as py-spy saw it; frames innermost first.

    A msgspec Struct, not a dataclass: workers send ~500 of them per sample through a pipe,
    and ``msgspec.structs.replace`` is ~10x cheaper than ``dataclasses.replace``."""

    os_thread_id: Optional[int]
    thread_id: int
    thread_name: Optional[str]
    active: bool
    owns_gil: bool
    frames: Tuple[Frame, ...]
    # ``stack_id(frames)`` when the reader already computed it (diag.collect.process_work does).
    stack_id: Optional[str] = None


class _PySpyFrame(msgspec.Struct):
    name: str = ""
    filename: str = ""
    module: Optional[str] = None
    line: Optional[int] = 0


class _PySpyThread(msgspec.Struct):
    thread_id: int = 0
    thread_name: Optional[str] = None
    os_thread_id: Optional[int] = None
    active: bool = False
    owns_gil: bool = False
    frames: List[_PySpyFrame] = []


_dump_decoder = msgspec.json.Decoder(List[_PySpyThread])

# Budgets on what a target controls in a stack (both readers): a name or file name is cut to
# MAX_NAME_CHARS and marked; a thread keeps its innermost MAX_FRAMES frames, then one marker
# frame; a process its first MAX_THREADS threads. A 1 MB function name 150 frames deep costs
# diag 4 KiB a frame, not 150 MB. ``truncation_of`` says what was cut, for the failure record.
MAX_NAME_CHARS = 4096
MAX_FRAMES = 512
MAX_THREADS = 4096
TRUNCATED = "…[truncated]"
FRAMES_CUT = "…[more frames not read]"


def cap_text(text: str, limit: int = MAX_NAME_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + TRUNCATED


def frames_cut_marker() -> Frame:
    return Frame(name=FRAMES_CUT)


def truncation_of(dumps: Sequence[PyThreadDump]) -> Optional[str]:
    """What the budgets cut from ``dumps`` in words ("truncated: ..."), None when nothing."""
    counts: Dict[Tuple[Frame, ...], int] = {}
    for dump in dumps:
        counts[dump.frames] = counts.get(dump.frames, 0) + 1
    return truncation_of_stacks(counts, len(dumps))


def truncation_of_stacks(counts: Mapping[Tuple[Frame, ...], int], threads: int) -> Optional[str]:
    """``truncation_of`` from each distinct stack and how many threads run it: a process's
    threads share a few stacks, and looking at every frame of every thread was ~5 % of
    reading a 64-thread rank."""
    names = frames = 0
    for stack, count in counts.items():
        for frame in stack:
            if frame.name == FRAMES_CUT:
                frames += count
            elif frame.name.endswith(TRUNCATED) or frame.filename.endswith(TRUNCATED):
                names += count
    parts = []
    if threads >= MAX_THREADS:
        parts.append(f"only the first {MAX_THREADS} threads read")
    if frames:
        parts.append(f"{frames} thread(s) deeper than {MAX_FRAMES} frames cut")
    if names:
        parts.append(f"{names} frame(s) with a name or file name over {MAX_NAME_CHARS} chars cut")
    return "truncated: " + "; ".join(parts) if parts else None


def parse_pyspy_json(text: str) -> List[PyThreadDump]:
    """Parse ``py-spy dump --json`` output (a JSON array, one object per Python thread)."""
    try:
        threads = _dump_decoder.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        head = " ".join(text.split())[:120]
        raise StackError(KIND_ERROR, f"py-spy printed unreadable output ({exc}): {head!r}") from exc
    return [
        PyThreadDump(
            os_thread_id=t.os_thread_id,
            thread_id=t.thread_id,
            thread_name=cap_text(t.thread_name) if t.thread_name else t.thread_name,
            active=t.active,
            owns_gil=t.owns_gil,
            frames=_capped_frames(t.frames),
        )
        for t in threads[:MAX_THREADS]
    ]


def _capped_frames(frames: List[_PySpyFrame]) -> Tuple[Frame, ...]:
    out = [
        Frame(
            name=cap_text(f.name),
            filename=cap_text(f.filename),
            line=f.line or 0,
            module=cap_text(f.module) if f.module else f.module,
        )
        for f in frames[:MAX_FRAMES]
    ]
    if len(frames) > MAX_FRAMES:
        out.append(frames_cut_marker())
    return tuple(out)


def stack_id(frames: Sequence[Frame]) -> str:
    """A short id that is the same for the same frames in any process, run or machine."""
    digest = hashlib.blake2b(digest_size=8)
    for f in frames:
        digest.update(f"{f.name}\0{f.filename}\0{f.line}\0{f.module or ''}\n".encode())
    return digest.hexdigest()


def _with_dump(thread: ThreadSample, dump: PyThreadDump, sid: str) -> ThreadSample:
    return msgspec.structs.replace(
        thread,
        py_thread_name=dump.thread_name,
        stack_id=sid,
        py_active=dump.active,
        owns_gil=dump.owns_gil,
    )


def join_stacks(
    threads: Tuple[ThreadSample, ...],
    dumps: List[PyThreadDump],
    pid: Optional[int] = None,
    frames_of: Mapping[str, Tuple[Frame, ...]] = {},
) -> Tuple[Tuple[ThreadSample, ...], Dict[str, Stack]]:
    """Attach each dump to its OS thread (see the module docstring); intern the stacks.
    ``frames_of``: the frames of dumps that carry only their ``stack_id`` (a worker's read)."""
    joined = list(threads)
    index_of = {t.tid: i for i, t in enumerate(joined)}
    claimed: Set[int] = set()
    stacks: Dict[str, Stack] = {}
    unmatched: List[Tuple[PyThreadDump, str]] = []
    for dump in dumps:
        sid = dump.stack_id or stack_id(dump.frames)
        if sid not in stacks:
            stacks[sid] = Stack(frames=frames_of.get(sid, dump.frames))
        i = index_of.get(dump.os_thread_id) if dump.os_thread_id is not None else None
        if i is not None and i not in claimed:
            joined[i] = _with_dump(joined[i], dump, sid)
            claimed.add(i)
        else:
            unmatched.append((dump, sid))

    placeholder = 0
    for dump, sid in unmatched:
        i = _fallback_match(joined, claimed, dump, pid)
        if i is not None:
            joined[i] = _with_dump(joined[i], dump, sid)
            claimed.add(i)
            continue
        if dump.os_thread_id is not None:
            tid = dump.os_thread_id
        else:
            placeholder -= 1
            tid = placeholder
        joined.append(_with_dump(ThreadSample(tid=tid, name=dump.thread_name or ""), dump, sid))
    return tuple(joined), stacks


def _fallback_match(
    threads: List[ThreadSample], claimed: Set[int], dump: PyThreadDump, pid: Optional[int]
) -> Optional[int]:
    free = [i for i in range(len(threads)) if i not in claimed]
    if dump.os_thread_id is not None:
        return None  # py-spy named its OS thread and /proc did not list it: do not guess.
    if dump.thread_name == "MainThread" and pid is not None:
        leader = [i for i in free if threads[i].tid == pid]
        if len(leader) == 1:
            return leader[0]
    if dump.thread_name:
        comm = dump.thread_name[:15]
        named = [i for i in free if threads[i].name == comm]
        if len(named) == 1:
            return named[0]
    return None
