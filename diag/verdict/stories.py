"""The stories behind each verdict: evidence items, suspects and the one-sentence summary.

``classify`` decides the state; these functions explain it in terms a person can act on and
name who to look at: the rank that died, the rank whose stack differs, the bottleneck the
others wait for, the threads of a lock cycle.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, List, Mapping, Optional, Sequence, Set, Tuple

from diag.frameworks import union
from diag.model import RankClass, Suspect
from diag.text.roles import framework_role, named
from diag.verdict.evidence import SPIN_PCT
from diag.verdict.features import ProcSignals
from diag.verdict.progress import LogGrowth
from diag.verdict.sources import Context
from diag.verdict.tcp_ends import Receiving
from diag.verdict.waits import PEER, STDIN
from diag.verdict.wording import (
    group_by_wait,
    log_moved,
    short_label,
    size,
    verb,
    waits_phrase,
    where,
    who,
)
from diag.vocab import WaitKind

# A lock, a condition, or an opaque native block: a wait another thread can end.
_LOCKISH: FrozenSet[WaitKind] = frozenset({"lock", "condition", "blocked"})


def _suspect(p: ProcSignals, reason: str, rank: Optional[int] = None) -> Suspect:
    return Suspect(pid=p.pid, rank=p.rank if rank is None else rank, host=p.key[0], reason=reason)


def _missing_ranks(ctx: Context) -> List[int]:
    sizes = {p.info.world_size for p in ctx.participants if p.info.world_size}
    if len(sizes) != 1:
        return []
    seen = {p.rank for p in ctx.participants if p.rank is not None}
    return [r for r in range(sizes.pop()) if r not in seen]


def dead_story(
    dead: Sequence[ProcSignals], alive: Sequence[ProcSignals], ctx: Context
) -> Tuple[str, List[Suspect]]:
    """A rank died while its peers are still there, waiting for it."""
    missing = _missing_ranks(ctx)
    suspects: List[Suspect] = []
    names: List[str] = []
    # A crash (a signal, an error code) before a clean exit: the one that took the others down.
    for p in sorted(dead, key=lambda q: q.exit_code in (None, 0)):
        rank = p.rank
        if rank is None and len(dead) == 1 and len(missing) == 1:
            rank = missing[0]  # a zombie has no environ; it is the rank nobody else is
        code = f", exit code {p.exit_code}" if p.exit_code is not None else ""
        if p.exit_code == -9:
            code += ": SIGKILL - the OOM killer? see `dmesg`"
        role = framework_role(p.info.cmdline, p.info.name)
        if rank is not None:
            head = f"rank {rank}" if role is None else named(role, rank, p.pid)
            names.append(f"{head} (pid {p.pid}, {p.statuses[-1]}{code})")
        elif role is not None:  # a framework's title, even a zombie's cut one: "scheduler"
            names.append(f"{role.name} (pid {p.pid}, {p.statuses[-1]}{code})")
        else:
            names.append(f"pid {p.pid} ({p.statuses[-1]}{code})")
        suspects.append(_suspect(p, f"{p.statuses[-1]}{code} while its peers wait", rank))
    waiting = waits_phrase(group_by_wait(alive)[:2])
    subject = " and ".join(names)
    whose = "rank's" if any(p.rank is not None for p in dead) else "process's"
    summary = (
        f"{subject} {verb(dead, 'exited', 'exited')} while {waiting} - "
        f"they will never finish; kill the job, read the dead {whose} log, restart"
    )
    return summary, suspects


_DEBUGGER_FRAMES = union.DEBUGGER_FRAMES


def at_debugger(p: ProcSignals) -> bool:
    """Its main thread reads stdin inside a debugger or console (pdb's ``Cmd.cmdloop``,
    ``Pdb.interaction``, ``code.interact``): a person was meant to answer."""
    w = p.main_wait
    names = (w.label, w.caller) if w is not None else ()
    return any(n.rpartition(".")[2] in _DEBUGGER_FRAMES for n in names if n)


def peer_story(
    waiters: Sequence[ProcSignals],
    alive: Sequence[ProcSignals],
    odd: Sequence[RankClass],
    classes: Sequence[RankClass],
    ctx: Context,
) -> Tuple[str, List[Suspect], float]:
    """Ranks wait on peers and nothing moves: find the rank they wait for."""
    suspects: List[Suspect] = []
    odd_keys: Set[Tuple[str, int]] = {key for c in odd for key in c.members()}
    others = [p for p in alive if p.main_family != PEER]
    for p in others:
        suspects.append(
            _suspect(p, f"not in the collective its peers wait in: waits in {where(p)}")
        )
    for p in alive:
        if p.key in odd_keys and p not in others:
            suspects.append(_suspect(p, f"stack differs from its peers: {where(p)}"))
    missing = _missing_ranks(ctx)
    text = waits_phrase(group_by_wait([p for p in waiters if p.key not in odd_keys])[:3])
    if suspects:
        summary, confidence = _diverged_sentence(text, alive, suspects), 0.85
    elif missing:
        summary = (
            f"{text}; rank(s) {','.join(map(str, missing[:8]))} of the world "
            "never showed up - kill the job and look for the missing rank"
        )
        confidence = 0.75
    elif len(group_by_wait(waiters)) > 1:
        summary = (
            f"{text} - the ranks wait in different places (a mismatched "
            "collective) with no CPU, I/O or log progress; kill the job and compare "
            "their code paths"
        )
        confidence = 0.75
    else:
        summary = (
            f"{text}, all in the same place with no CPU, I/O or log "
            "progress - a peer outside this capture, or a mismatched collective; kill "
            "the job"
        )
        confidence = 0.7
    spinners = [p for p in waiters if p.spin_pct >= SPIN_PCT]
    if spinners:
        spins = verb(spinners, "spins", "spin")
        summary += f" ({who(spinners)} {spins} a core in the wait: not progress)"
    return summary, suspects, confidence


def _diverged_sentence(text: str, alive: Sequence[ProcSignals], suspects: Sequence[Suspect]) -> str:
    """Peers wait and the named ranks are elsewhere: at a prompt (answer it), or diverged."""
    named = {(s.host, s.pid) for s in suspects}
    culprits = [p for p in alive if p.key in named]
    prompts = [p for p in culprits if p.main_wait is not None and p.main_wait.kind == STDIN]
    if prompts:
        q = prompts[0]
        what = "a debugger prompt (pdb, `breakpoint()`)" if at_debugger(q) else "a prompt"
        return (
            f"{text}, but {who(prompts)} {verb(prompts, 'reads', 'read')} "
            f"stdin in {where(q)} - {what} waits for someone to type at its terminal, "
            "and its peers wait for it: answer it (pdb: `c` continues), or kill the job "
            "and remove the prompt"
        )
    odd_text = waits_phrase(group_by_wait(culprits)[:2])
    # A diverged rank may burn a core asking the same thing (``while not exists(flag)``):
    # its CPU is no progress, and the sentence must not say it has none.
    spinning = [p for p in culprits if p.spin_pct >= SPIN_PCT]
    still = (
        f"{who(spinning)} {verb(spinning, 'spins', 'spin')} a core asking the same thing "
        "again and again (a poll loop, not progress), no I/O or log progress"
        if spinning
        else "no CPU, I/O or log progress"
    )
    return (
        f"{text}, but {odd_text} - {who(culprits)} "
        f"{verb(culprits, 'diverged', 'diverged')}; {still}: "
        f"kill the job and look at {who(culprits)}"
    )


def _thread_groups(p: ProcSignals) -> str:
    """ "4 threads in `waiter` on 0x55..a0, 2 threads in `waiter` on 0x55..d0": one entry per
    (frame, lock) pair, so fifty waiters read as one line."""
    counts: Dict[Tuple[str, str], int] = {}
    for _, addr, frame in p.lock_waiters:
        key = (frame, addr or "?")
        counts[key] = counts.get(key, 0) + 1
    parts = [
        f"{n} thread{'s' if n != 1 else ''} in `{short_label(frame)}` on {addr}"
        for (frame, addr), n in sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    ]
    if len(counts) > 3:
        parts.append(f"{len(counts) - 3} more")
    return ", ".join(parts)


def lock_story(
    lockers: Sequence[ProcSignals], alive: Sequence[ProcSignals] = ()
) -> Tuple[str, List[Suspect]]:
    """Threads blocked on locks in every sample: a cycle (two locks in one process) or one
    lock nobody will release; the processes waiting on the lockers are named too."""
    suspects = []
    cycle = False
    alike: Dict[str, List[ProcSignals]] = {}  # forked workers blocked the same way: one entry
    for p in lockers:
        addrs = {addr or "?" for _, addr, _ in p.lock_waiters}
        cycle = cycle or len(addrs) >= 2
        threads = _thread_groups(p)
        n = len(p.lock_waiters)
        text = (
            f"{n} thread{'s' if n != 1 else ''} blocked on "
            f"{len(addrs)} lock{'s' if len(addrs) != 1 else ''} ({threads})"
        )
        alike.setdefault(text, []).append(p)
        suspects.append(_suspect(p, f"threads blocked on locks in every sample: {threads}"))
    parts = [
        f"{who(procs)} {'has' if len(procs) == 1 else 'each have'} {text}"
        for text, procs in list(alike.items())[:2]
    ]
    others = [p for p in alive if p not in lockers and p.main_wait and p.main_wait.kind]
    if others:
        parts.append(waits_phrase(group_by_wait(others)[:2]))
    if cycle:
        cause = "a lock cycle; dump it with py-spy, kill it and fix the lock order"
    else:
        cause = (
            "one lock nobody releases (its holder waits too, died or returned without "
            "releasing it, or it was copied held into a fork()ed child); dump it with py-spy "
            "to see the holder, kill it and fix the release"
        )
    summary = "; ".join(parts) + f" with no CPU, I/O or log progress - {cause}"
    return summary, suspects


def stopped_story(
    stopped: Sequence[ProcSignals], alive: Sequence[ProcSignals], since: str = ""
) -> Tuple[str, List[Suspect]]:
    """A process stopped by a signal or a debugger: nothing it owes its peers will come.
    ``since``: how long it has been stopped (``wait_age.stopped_words``), "" unknown."""
    others = [p for p in alive if p not in stopped]
    waiting = waits_phrase(group_by_wait(others)[:2])
    pids = " ".join(str(p.pid) for p in stopped[:8])
    how, until, state = _how_stopped(stopped, pids)
    summary = (
        f"{who(stopped)} {verb(stopped, 'is', 'are')} {how}{since} "
        f"in {where(stopped[0])}"
        + (f" while {waiting}" if waiting else "")
        + f" - nothing moves until {until}"
    )
    suspects = [_suspect(p, f"{state} in {where(p)}") for p in stopped]
    return summary, suspects


def _how_stopped(stopped: Sequence[ProcSignals], pids: str) -> Tuple[str, str, str]:
    """(how it is stopped, what ends it, its state) - SIGCONT resumes a stopped process, not
    one a tracer holds (``kill -CONT`` leaves it in state t) nor one its cgroup froze."""
    if all(p.frozen for p in stopped):
        return (
            "frozen by its cgroup (the freezer: `docker pause`, a Slurm suspend, a scheduler)",
            "its cgroup is thawed (`docker unpause`, `scontrol resume`, or THAWED into its "
            "freezer.state / 0 into cgroup.freeze) - kill -CONT does not resume it",
            "frozen by its cgroup in every sample",
        )
    if all(p.traced for p in stopped):
        return (
            "held by a tracer (state t: gdb, strace or another ptrace user stopped it)",
            "the tracer lets it go: find it (`grep TracerPid /proc/"
            f"{stopped[0].pid}/status`) and continue or quit it - `kill -CONT {pids}` does not "
            "resume a traced process",
            "held by a tracer (state t in every sample)",
        )
    return (
        "stopped (state T: SIGSTOP, ^Z or a debugger)",
        f"`kill -CONT {pids}` (or kill the job)",
        "stopped (state T in every sample)",
    )


def _titled(procs: Sequence[ProcSignals]) -> str:
    """ "pid 7163 (ray::A.ping), pid 7164 (ray::B.pong)": workers by the call their title
    names, where it differs from the interpreter's."""
    return ", ".join(
        f"pid {p.pid}" + (f" ({p.info.name})" if p.info.name not in ("", "python") else "")
        for p in procs[:4]
    )


def pool_story(
    waiters: Sequence[ProcSignals], alive: Sequence[ProcSignals]
) -> Tuple[str, List[Suspect]]:
    """A process waits for results it handed to a pool, and no worker computes them. A worker
    blocked opening a named pipe is the end of the chain the kernel names: no process has
    opened the pipe's other end, and the task goes on only when one does."""
    workers = [p for p in alive if p not in waiters]
    idle = waits_phrase(group_by_wait(workers)[:2]) if workers else ""
    # Who owes the result: a worker of the job blocked untimed in user code (a Ray actor
    # method in Event.wait, a pool task on a lock) is the end of the chain.
    owing = [
        p
        for p in workers
        if p.main_wait is not None and p.main_wait.kind in _LOCKISH and not p.main_wait.timed
    ]
    fifo = [p for p in workers if p.main_wait is not None and p.main_wait.kind == "fifo-open"]
    # Workers that are themselves waiting for results: calls inside calls. A worker runs one
    # call at a time (an actor without max_concurrency, a pool process), so a call waiting on
    # another worker's call that waits back - or on a call queued behind itself - never ends.
    nested = [p for p in waiters if p.info.role == "worker"]
    if fifo:
        cause = (
            f" - {who(fifo[:1])}'s task is blocked opening a named pipe (fifo) in "
            f"{where(fifo[0])}: no process has opened its other end, and none of the job will. "
            "Start the pipe's writer (or fix the path the task opens), or kill and rerun "
            "without it"
        )
    elif len(nested) >= 2 and not owing:
        cause = (
            f" - {_titled(nested)} are themselves calls waiting for results: each worker runs one "
            "call at a time, so calls that wait on each other's calls (A calls B, which calls "
            "back into A) or on a call queued behind themselves never complete - a cycle of "
            "nested calls, nothing died. Kill and rerun with the inner calls able to run "
            "(max_concurrency, async actors, or no call back into a busy worker)"
        )
    else:
        cause = (
            " - a task was lost (a worker killed, e.g. by the OOM killer: check dmesg) or its "
            "worker is blocked; kill and rerun"
        )
    summary = (
        f"{who(waiters)} {verb(waiters, 'waits', 'wait')} for results in "
        f"{where(waiters[0])} but nothing computes them" + (f" ({idle})" if idle else "") + cause
    )
    suspects = [
        _suspect(p, f"blocked opening a named pipe (fifo) in {where(p)}: no process opened its "
                 "other end - the result its caller waits for comes only when one does")
        for p in fifo[:4]
    ]  # fmt: skip
    suspects += [
        _suspect(p, f"blocked in {where(p)}: the result its caller waits for never comes")
        for p in owing[:4]
    ]
    suspects += [_suspect(p, f"waits for a result nobody computes in {where(p)}") for p in waiters]
    return summary, suspects


def helper_work_story(
    helped: Sequence[Tuple[ProcSignals, float, List[str]]], alive: Sequence[ProcSignals]
) -> Tuple[str, List[Suspect]]:
    """A process waits on children that compute (inductor's g++/cc1plus, nvcc, a build step):
    the parent's own threads sleep, the work is in processes that live a second each."""
    parts: List[str] = []
    suspects: List[Suspect] = []
    for p, pct, names in helped[:3]:
        shown = ", ".join(names[:3]) if names else "short-lived, reaped between samples"
        # A Python child is named by where it computes ("pid N python in `f`"): a data
        # loader's worker, a preprocessing script - not necessarily a compiler.
        python_only = bool(names) and all(n.startswith("pid ") for n in names)
        what = (
            "the job's work runs there (data loading, preprocessing, a build step)"
            if python_only
            else "compiling or building"
        )
        text = (
            f"{who([p])} waits on its child processes, which compute ({shown}: "
            f"{pct:.0f}% of a core) - {what}"
        )
        parts.append(text)
        suspects.append(_suspect(p, text))
    return _slow_summary(parts, alive, {p.key for p, _, _ in helped}), suspects


def _slow_summary(
    parts: Sequence[str], alive: Sequence[ProcSignals], busy: Set[Tuple[str, int]]
) -> str:
    """ "slow: <who works>; <who waits for it> - wait, don't kill"."""
    waiting = [p for p in alive if p.key not in busy and p.main_wait and p.main_wait.kind]
    tail = waits_phrase(group_by_wait(waiting)[:2])
    return "; ".join(parts) + (f"; {tail}" if tail else "") + " - wait, don't kill"


def work_story(
    workers: Sequence[ProcSignals],
    readers: Sequence[ProcSignals],
    growers: Sequence[ProcSignals],
    alive: Sequence[ProcSignals],
    peer_waiters: Sequence[ProcSignals],
    native: Mapping[Tuple[str, int], str] = {},
    receivers: Mapping[Tuple[str, int], Receiving] = {},
) -> Tuple[str, List[Suspect]]:
    """Someone is working without visible output: name it, and those waiting for it; a
    process whose native threads compute inside one call is named by that call (``native``,
    from ``diag.verdict.native_work``), not by their comm; one fed through a socket it blocks
    on by the connection (``receivers``, from ``diag.verdict.tcp_ends``)."""
    # By key, not ``in`` a list: ProcSignals compare field by field, and at 4,096 workers the
    # list's membership test alone took seconds (every rule is asked, even after one decides).
    busy: List[ProcSignals] = []
    seen: Set[Tuple[str, int]] = set()
    for p in [*workers, *readers, *growers]:
        if p.key not in seen:
            seen.add(p.key)
            busy.append(p)
    parts: List[str] = []
    suspects: List[Suspect] = []
    for p in busy[:3]:
        hot = short_label(p.hot_label)
        rss = (
            f", RSS {'+' if p.rss_delta_bytes >= 0 else ''}{size(p.rss_delta_bytes)}"
            if abs(p.rss_delta_bytes) >= 16 << 20
            else ""
        )
        if p in workers and p.intervals == 0:
            text = f"{who([p])} runs in `{hot}` outside any known wait"
        elif p in workers and p.key in native:
            text = f"{p.name} is CPU-bound in {native[p.key]}" + (f" ({rss[2:]})" if rss else "")
        elif p in workers:
            one_call = (
                ", one long call: same stack in every sample"
                if p.main_moved == 0 and p.intervals >= 1
                else ""
            )
            text = (
                f"{who([p])} is CPU-bound in `{hot}` ({p.compute_pct:.0f}% of a core "
                f"in {p.compute_intervals} of {p.intervals} intervals{one_call}{rss})"
            )
        elif p.key in receivers:
            r = receivers[p.key]
            text = (
                f"{who([p])} receives {size(r.got_bytes / r.window_s)}/s from {r.end.remote} "
                f"({size(r.got_bytes)} in {r.window_s:.1f} s, the last "
                f"{r.end.last_recv_s or 0:.1f} s ago) in {where(p)} - a slow transfer, "
                "network-bound, not a wait"
            )
        elif p in readers:
            got = max(p.read_delta_bytes, p.file_progress_bytes)
            rate = got / p.window_s if p.window_s > 0 else 0.0
            text = (
                f"{who([p])} reads {size(rate)}/s ({size(got)} in "
                f"{p.window_s:.1f} s) at {p.cpu_pct:.0f}% CPU in {where(p)} - I/O-bound"
            )
        else:
            text = f"{who([p])} grows memory ({size(p.rss_delta_bytes)} RSS) in `{hot or '?'}`"
        parts.append(text)
        waited_for = any(w.key != p.key for w in peer_waiters)  # by others, not itself
        reason = "the bottleneck its peers wait for - " if waited_for else ""
        suspects.append(_suspect(p, reason + text))
    if not parts:
        parts.append("the GPU computes (see the gpu evidence) while the CPU side waits")
    return _slow_summary(parts, alive, {p.key for p in busy}), suspects


def progress_story(
    progress_logs: Sequence[LogGrowth],
    writers: Sequence[ProcSignals],
    workers: Sequence[ProcSignals],
    dead: Sequence[ProcSignals],
) -> Tuple[str, float, List[Suspect]]:
    """The job's output moves: say which output, and who computes."""
    bits: List[str] = []
    for lg in progress_logs[:2]:
        name = lg.path.rsplit("/", 1)[-1]
        bits.append(log_moved(name, lg.grew_lines, lg.grew_bytes, lg.redrawn))
    exchangers = [p for p in writers if p.main_family == PEER and not p.main_moved]
    others = [p for p in writers if p not in exchangers]
    if others and not progress_logs:
        total = sum(p.write_delta_bytes for p in others)
        window_s = max(p.window_s for p in others)
        keeps = verb(others, "keeps", "keep")
        bits.append(f"{who(others)} {keeps} writing output ({size(total)} in {window_s:.1f} s)")
    if exchangers:
        total = sum(p.write_delta_bytes for p in exchangers)
        window_s = max(p.window_s for p in exchangers)
        bits.append(
            f"{who(exchangers)} {verb(exchangers, 'keeps', 'keep')} moving data in "
            f"{where(exchangers[0])} ({size(total)} sent in {window_s:.1f} s): the collectives "
            "complete; a loop calling them from one line is sampled there every time"
        )
    if workers:
        bits.append(f"{who(workers)} compute in `{short_label(workers[0].hot_label)}`")
    confidence = 0.85 if progress_logs else 0.7
    suspects: List[Suspect] = []
    if dead:
        bits.append(f"but {who(dead)} exited")
        confidence -= 0.2
        suspects = [_suspect(p, "exited during the run") for p in dead]
    return "; ".join(bits), confidence, suspects
