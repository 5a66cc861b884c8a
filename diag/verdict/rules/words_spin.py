"""The rules' words for a spin on a flag, or a wait on an event, whose setter died
(``dead_setter``), and for a native spin-wait nothing in the job can end.

May import the base and ``diag.verdict`` - never a family module of the table.
"""

from __future__ import annotations

from diag.verdict.dead_setter import BlockOnDead, SpinOnDead
from diag.verdict.native_waits import NativeSpin
from diag.verdict.signals import ProcSignals
from diag.verdict.wording import short_label

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


SPIN_ALONE_OUTRANKS = (
    "a busy-wait whose writer no live process of the job can be spins for ever: its CPU is "
    "no work, and no peer of the job is behind it to blame"
)


def _spin_place(spin: NativeSpin) -> str:
    """ "libspin.so:`wait_flag`" - the file and the function the loop is in."""
    return f"{spin.library}:`{short_label(spin.symbol)}`" if spin.symbol else f"`{spin.library}`"


def spins_with_no_party(p: ProcSignals, spin: NativeSpin, caller: str) -> str:
    """``spins_with_no_party``: the spinner, its loop, and why nothing can end it."""
    hint = (spin.hint or "spin").upper()
    called = f" (called from `{caller}`)" if caller else ""
    return (
        f"{p.name} spins in a {hint} loop at {_spin_place(spin)}{called} for "
        f"{p.window_s:.0f} s - {p.spin_pct:.0f}% of a core, the same stack at every sample: a "
        "busy-wait for memory another party writes (a peer's flag, a message), and nothing "
        "in the job runs that could end it - no other process computes, reads or writes, and "
        "nothing it waits on can wake. Its writer is gone (a peer that crashed and was "
        "reaped: look for its death in the job's log or its exit status); kill it. If the "
        "writer lives outside this capture (another job mapping the same memory, a device), "
        "capture that too"
    )


def spin_alone_reason(spin: NativeSpin, window_s: float) -> str:
    """The spinner as a suspect."""
    hint = (spin.hint or "spin").upper()
    return (
        f"spins in a {hint} loop at {_spin_place(spin)} for {window_s:.0f} s; nothing in the "
        "job runs that could end it"
    )
