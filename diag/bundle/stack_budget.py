"""Total budgets on the stacks of one capture (issue #25): what a target's stacks may cost.

Why: the per-read cuts (a name at 4 KiB, 512 frames, 4,096 threads) bound one thread, not a
capture. 40 threads in distinct 300-511-deep stacks of a 5,000-character function name gave
135 MB of JSON, 72 MB of HTML and 1.4 GiB of RSS; at the 4,096-thread cap, ~14 GB. So:

- a frame keeps at most FRAME_NAME_CHARS of its function name and FRAME_FILE_CHARS of its
  file name (a prefix, then ``…[truncated]``): real qualified names and venv paths are far
  shorter;
- the distinct stacks of a capture (each stored once, by id, however many threads and samples
  share it) may take MAX_STACK_BYTES in all; a new stack past that keeps its innermost
  FRAMES_PAST_BUDGET frames (where the wait is) and a marker frame saying how many more were
  not kept; past twice that, only a marker frame. ``StackBudget`` counts what it cut, for the
  failure record.

The sizes are those of the stack as JSON (``stack_bytes``), so the budget bounds the bundle,
the journal and the report alike.
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Tuple

from diag.model import Frame, ProbeFailure, Stack


def budget_bytes(variable: str, default: int) -> int:
    """A byte budget, lowered (never raised) by the environment variable ``variable``: the
    tests reach the caps with small targets (DIAG_MAX_STACK_BYTES, DIAG_MAX_JSON_BYTES,
    DIAG_MAX_HTML_BYTES)."""
    raw = os.environ.get(variable, "")
    return min(default, int(raw)) if raw.isdigit() and int(raw) > 0 else default


FRAME_NAME_CHARS = 512
FRAME_FILE_CHARS = 1024
MAX_STACK_BYTES = 16 << 20
FRAMES_PAST_BUDGET = 32
CUT = "…[truncated]"
_FRAME_OVERHEAD_BYTES = 48  # {"name":"","filename":"","line":N} and a comma


def shorten(text: str, limit: int) -> str:
    """``text`` cut to a ``limit``-character prefix and marked, when longer."""
    return text if len(text) <= limit else text[:limit] + CUT


def shorten_frames(frames: Tuple[Frame, ...]) -> Tuple[Frame, ...]:
    """``frames`` with every name cut to the per-frame caps (the same tuple when none was)."""
    if all(len(f.name) <= FRAME_NAME_CHARS and len(f.filename) <= FRAME_FILE_CHARS for f in frames):
        return frames
    out = []
    for f in frames:
        if len(f.name) > FRAME_NAME_CHARS or len(f.filename) > FRAME_FILE_CHARS:
            f = Frame(
                name=shorten(f.name, FRAME_NAME_CHARS),
                filename=shorten(f.filename, FRAME_FILE_CHARS),
                line=f.line,
                module=None if f.module is None else shorten(f.module, FRAME_FILE_CHARS),
            )
        out.append(f)
    return tuple(out)


def stack_bytes(stack: Stack) -> int:
    """About what ``stack`` takes in the JSON bundle (UTF-8 counted as characters)."""
    return sum(
        len(f.name) + len(f.filename) + len(f.module or "") + _FRAME_OVERHEAD_BYTES
        for f in stack.frames
    )


def cut_stack(stack: Stack, keep: int, why: str) -> Stack:
    """The innermost ``keep`` frames of ``stack`` and a marker frame naming what was left."""
    if len(stack.frames) <= keep:
        return stack
    left = len(stack.frames) - keep
    return Stack(
        frames=(*stack.frames[:keep], Frame(name=f"…[{left} more frames not kept: {why}]"))
    )


class StackBudget:
    """The stacks budget of one capture: admits each new distinct stack, cut as needed."""

    def __init__(self, max_bytes: Optional[int] = None) -> None:
        self.max_bytes = (
            max_bytes
            if max_bytes is not None
            else budget_bytes("DIAG_MAX_STACK_BYTES", MAX_STACK_BYTES)
        )
        self.used_bytes = 0
        self.cut = 0  # stacks kept with their innermost frames only
        self.dropped = 0  # stacks kept as a marker only
        self._reported = (0, 0)
        # One string object per distinct name or file name kept: a recursion 400 deep in one
        # function holds its name once in memory, not 400 times (decoded from a worker's pipe,
        # each frame had its own copy). Bounded by the budget: only kept names are here.
        self._names: Dict[str, str] = {}

    def _interned(self, frames: Tuple[Frame, ...]) -> Tuple[Frame, ...]:
        names = self._names
        out = []
        for f in frames:
            name = names.setdefault(f.name, f.name)
            filename = names.setdefault(f.filename, f.filename)
            if name is not f.name or filename is not f.filename:
                f = Frame(name=name, filename=filename, line=f.line, module=f.module)
            out.append(f)
        return tuple(out)

    def admit(self, stack: Stack) -> Stack:
        """``stack`` as the bundle keeps it, its bytes counted."""
        stack = Stack(frames=shorten_frames(stack.frames))
        size = stack_bytes(stack)
        if self.used_bytes + size > self.max_bytes:
            if self.used_bytes < 2 * self.max_bytes:
                stack = cut_stack(stack, FRAMES_PAST_BUDGET, "the capture's stack budget")
                self.cut += 1
            else:
                stack = Stack(frames=(Frame(name="…[stack not kept: the capture's stack budget]"),))
                self.dropped += 1
            size = stack_bytes(stack)
        self.used_bytes += size
        return Stack(frames=self._interned(stack.frames))

    def failure(self, host: str, sample: int) -> Optional[ProbeFailure]:
        """A record of what was cut since the last call, None when nothing new was."""
        now = (self.cut, self.dropped)
        if now == self._reported:
            return None
        cut, dropped = now[0] - self._reported[0], now[1] - self._reported[1]
        self._reported = now
        return ProbeFailure(
            probe="stacks",
            reason=(
                f"truncated: the capture's stacks reached their budget "
                f"({self.max_bytes:,} bytes): {cut} more stacks kept with their innermost "
                f"{FRAMES_PAST_BUDGET} frames only, {dropped} more stacks not kept"
            ),
            host=host,
            sample=sample,
        )


def cut_all(stacks: Dict[str, Stack], keep: int, why: str) -> Tuple[Dict[str, Stack], int]:
    """Every stack of ``stacks`` deeper than ``keep`` cut (an output over its cap); how many."""
    out: Dict[str, Stack] = {}
    n = 0
    for sid, stack in stacks.items():
        out[sid] = cut_stack(stack, keep, why)
        n += out[sid] is not stack
    return out, n
