"""Stack identity for the report: signatures, the distinct-stack registry and stack diffs.

Two ranks "do the same thing" when their main threads run the same functions from the same
call sites: signatures keep the line numbers of user frames (a rank at line 30 of a script
while its peers wait at line 28 is the odd one) and drop them for library frames (versions
differ across nodes), the same rule as the verdict's equivalence classes (diag.verdict.equivalence).
Each distinct stack is rendered once in the report and referenced everywhere else by its label
(S1, S2, ...), which keeps a day-long capture small.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, TypeVar

from diag.frames import Signature, stack_signature
from diag.model import Frame, Stack
from diag.render import fmt
from diag.render.view import FrameView, StackView

T = TypeVar("T")


def signature(stack: Stack) -> Signature:
    """The stack's identity (``diag.frames.stack_signature``, shared with the verdict)."""
    return stack_signature(stack.frames)


def where(frame: Frame) -> str:
    name = os.path.basename(frame.filename) if frame.filename else "?"
    return f"{name}:{frame.line}" if frame.line else name


def top(stack: Optional[Stack]) -> str:
    """The innermost frame, as people quote it: ``all_reduce (distributed_c10d.py:2806)``."""
    if stack is None or not stack.frames:
        return ""
    frame = stack.frames[0]
    return f"{frame.name} ({where(frame)})"


def chain(stack: Stack, depth: int = 5) -> str:
    """Outer → inner function names, the last ``depth`` calls: how the thread got there."""
    names = [f.name for f in reversed(stack.frames)]
    shown = names[-depth:]
    return ("… › " if len(names) > depth else "") + " › ".join(shown)


def change(old: Stack, new: Stack) -> str:
    """What moved between two stacks: the first differing call below their common callers."""
    a, b = list(reversed(old.frames)), list(reversed(new.frames))
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    if common == len(a) == len(b):
        return ""
    was = a[common] if common < len(a) else None
    now = b[common] if common < len(b) else None
    under = f" under {a[common - 1].name}" if common else ""
    if was is not None and now is not None and (was.name, was.filename) == (now.name, now.filename):
        moved = f"{now.name} line {was.line} → {now.line}{under}"
        inner_was, inner_now = old.frames[0], new.frames[0]
        if inner_now.name != now.name and inner_was.name != inner_now.name:
            return f"now in {inner_now.name} (was {inner_was.name}); {moved}"
        return moved
    if now is None:
        return f"returned from {was.name if was else '?'}{under}"
    if was is None:
        return f"called {now.name}{under}"
    return f"{was.name} → {now.name}{under}"


class StackRegistry:
    """Hands out S1, S2, ... in order of first reference and renders each stack once."""

    def __init__(self, stacks: Dict[str, Stack]) -> None:
        self._stacks = stacks
        self._labels: Dict[str, str] = {}
        self._users: Dict[str, List[str]] = {}
        self._seen_users: Dict[str, Set[str]] = {}
        self._memo: Dict[str, Any] = {}

    def memo(self, stack_id: str, compute: Callable[[], T]) -> T:
        """Per-stack cache (signatures): a day-long capture repeats few stacks many times."""
        if stack_id not in self._memo:
            self._memo[stack_id] = compute()
        return self._memo[stack_id]  # type: ignore[no-any-return]

    def get(self, stack_id: Optional[str]) -> Optional[Stack]:
        return self._stacks.get(stack_id) if stack_id is not None else None

    def ref(self, stack_id: Optional[str], user: str = "") -> Tuple[str, str]:
        """(anchor, label) of a stack, registering it; ("", "") when the stack is unknown."""
        if stack_id is None or stack_id not in self._stacks:
            return "", ""
        label = self._labels.get(stack_id)
        if label is None:
            label = self._labels[stack_id] = f"S{len(self._labels) + 1}"
            self._users[stack_id] = []
            self._seen_users[stack_id] = set()
        if user and user not in self._seen_users[stack_id]:
            self._seen_users[stack_id].add(user)
            self._users[stack_id].append(user)
        return anchor(stack_id), label

    def views(self) -> Tuple[StackView, ...]:
        out = []
        for stack_id, label in self._labels.items():
            stack = self._stacks[stack_id]
            users = self._users[stack_id]
            used_by = ", ".join(users[:12]) + (
                f" and {len(users) - 12} more" if len(users) > 12 else ""
            )
            out.append(
                StackView(
                    anchor=anchor(stack_id),
                    label=label,
                    frames=tuple(
                        FrameView(name=f.name, where=fmt.clip(f"{f.filename}:{f.line}", 160))
                        for f in stack.frames
                    ),
                    used_by=used_by,
                )
            )
        return tuple(out)


def anchor(stack_id: str) -> str:
    return "stack-" + "".join(c if c.isalnum() else "-" for c in stack_id)
