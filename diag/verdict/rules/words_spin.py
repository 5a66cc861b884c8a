"""The rules' words for a spin on a flag, or a wait on an event, whose setter died
(``dead_setter``).

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from diag.verdict.dead_setter import BlockOnDead, SpinOnDead

SPIN_DEAD_OUTRANKS = (
    "a spin whose setter is dead burns a core for ever: that is no work, whatever it burns"
)
BLOCK_DEAD_OUTRANKS = (
    "an untimed wait whose setter is dead never ends: a port or a timer elsewhere in the job "
    "is no door to it"
)


def spins_for_dead(f: SpinOnDead) -> str:
    """``spins_for_dead_thread``: the spinner, its line, the dead thread and its last words."""
    return (
        f"pid {f.proc.pid} (thread {f.thread}) spins in `{f.frame}` - the same "
        f"line at every sample, busy all along - and its log says thread `{f.dead}` died "
        f"(`{f.line}`); no live thread has that name. A busy-wait on a flag that thread was to "
        "set never ends: kill it and fix what killed the thread (and wait on an Event with a "
        "timeout, not a bare flag). If that line is a long call of its own instead, "
        f"`py-spy dump --pid {f.proc.pid}` twice shows it moving"
    )


def spin_reason(f: SpinOnDead) -> str:
    """The spinner as a suspect."""
    return f"spins in `{f.frame}` for thread `{f.dead}`, which died"


def blocks_for_dead(f: BlockOnDead) -> str:
    """``waits_for_dead_thread``: the waiter, its frame, the dead thread and its last words."""
    who = f"pid {f.proc.pid}" if f.proc.rank is None else f"rank {f.proc.rank} (pid {f.proc.pid})"
    return (
        f"{who}, thread {f.thread}, waits in `{f.wait}` ← `{f.frame}` - untimed, "
        f"the same stack and no CPU at every sample - and its log says thread `{f.dead}` died "
        f"(`{f.line}`); no live thread has that name. A wait for what that thread was to set "
        "never ends: kill it and fix what killed the thread (and wait with a timeout). If "
        f"another live thread sets it, `py-spy dump --pid {f.proc.pid}` shows that thread at "
        "work"
    )


def block_reason(f: BlockOnDead) -> str:
    """The waiter as a suspect."""
    return f"waits in `{f.frame}` for thread `{f.dead}`, which died"
