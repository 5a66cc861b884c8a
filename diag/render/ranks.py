"""Per-rank detail and the job-wide futex wait groups.

The thread table shows each thread's last kernel state next to what it cost over the capture
(CPU Δ); Python threads list their stacks as runs over samples with what changed, so "stuck
since sample 40" and "moving every sample" read differently; native-only threads (NCCL, CUDA,
OpenMP pools) are many and rarely interesting, so they are summarised by name/state/wchan.
Futex waits are grouped by (process, address): threads parked on one address wait for the same
lock, condition or event.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from diag.model import ProcessSample, ThreadSample
from diag.render import fmt
from diag.render.index import BundleIndex, Key, Proc
from diag.render.stacks import StackRegistry, change, top
from diag.render.view import FutexGroup, NativeGroup, PyThreadView, RankView, StackRun, ThreadRow

MAX_THREAD_ROWS = 300
MAX_RUNS = 12
MAX_FUTEX_GROUPS = 100

FutexKey = Tuple[str, int, str]  # (host, pid, address)

_FUTEX_CMDS = {
    0: "WAIT",
    1: "WAKE",
    5: "WAKE_OP",
    6: "LOCK_PI",
    9: "WAIT_BITSET",
    11: "WAIT_REQUEUE_PI",
}


def futex_op_text(op: Optional[int]) -> str:
    if op is None:
        return "?"
    text = _FUTEX_CMDS.get(op & 0x7F, f"cmd {op & 0x7F}")
    if op & 0x80:
        text += "|PRIVATE"
    if op & 0x100:
        text += "|CLOCK_REALTIME"
    if op == 0x189:
        text += " (Python lock/Event/Queue wait, no timeout)"
    return text


def build_futex_groups(
    index: BundleIndex,
) -> Tuple[Tuple[FutexGroup, ...], Dict[FutexKey, Tuple[str, str]], str]:
    """Groups in the last sample of each process, biggest first; plus label/anchor per key."""
    members: Dict[FutexKey, List[ThreadSample]] = {}
    owner: Dict[FutexKey, Proc] = {}
    seen: Dict[FutexKey, int] = {}
    for proc in index.procs:
        last = proc.last
        if last is None:
            continue
        for th in last.threads:
            if th.futex_addr:
                key = (proc.key[0], proc.key[1], th.futex_addr)
                members.setdefault(key, []).append(th)
                owner[key] = proc
        for _, ps in proc.samples:
            for addr in {th.futex_addr for th in ps.threads if th.futex_addr}:
                key = (proc.key[0], proc.key[1], addr)
                if key in members:
                    seen[key] = seen.get(key, 0) + 1
    order = sorted(members, key=lambda k: (-len(members[k]), index.procs.index(owner[k]), k[2]))
    labels: Dict[FutexKey, Tuple[str, str]] = {}
    groups = []
    for n, key in enumerate(order):
        label, anchor = f"F{n + 1}", f"futex-{n + 1}"
        labels[key] = (label, anchor)
        if n >= MAX_FUTEX_GROUPS:
            continue
        threads = members[key]
        names = ", ".join(f"{th.py_thread_name or th.name} ({th.tid})" for th in threads[:8])
        if len(threads) > 8:
            names += f" and {len(threads) - 8} more"
        groups.append(
            FutexGroup(
                label=label,
                anchor=anchor,
                addr=key[2],
                owner=f"{owner[key].label} (pid {key[1]})" + (f" on {key[0]}" if key[0] else ""),
                owner_anchor=owner[key].anchor,
                waiters=len(threads),
                threads=names,
                op=futex_op_text(threads[0].futex_op),
                samples_seen=seen.get(key, 0),
            )
        )
    note = f"{len(order)} groups in the last sample"
    if len(order) > MAX_FUTEX_GROUPS:
        note += f"; the {MAX_FUTEX_GROUPS} largest are shown"
    return tuple(groups), labels, note


def _ticks(th: ThreadSample) -> int:
    return th.utime_ticks + th.stime_ticks


def _thread_rows(
    index: BundleIndex,
    proc: Proc,
    last: ProcessSample,
    reg: StackRegistry,
    futex: Dict[FutexKey, Tuple[str, str]],
) -> Tuple[Tuple[ThreadRow, ...], str]:
    wanted = {th.tid for th in last.threads}
    first_ticks: Dict[int, Tuple[float, int]] = {}
    for _, ps in proc.samples:  # usually done after the first sample: threads live long
        for th in ps.threads:
            if th.tid in wanted and th.tid not in first_ticks:
                first_ticks[th.tid] = (ps.t_s, _ticks(th))
        if len(first_ticks) == len(wanted):
            break
    clk = index.bundle.host.clk_tck or 100
    rows = []
    for th in last.threads[:MAX_THREAD_ROWS]:
        t0, ticks0 = first_ticks.get(th.tid, (last.t_s, _ticks(th)))
        delta = max(0, _ticks(th) - ticks0)
        span = last.t_s - t0
        f_label, f_anchor = futex.get((proc.key[0], proc.key[1], th.futex_addr or ""), ("", ""))
        name = th.py_thread_name or th.name
        s_anchor, _ = reg.ref(th.stack_id, f"{proc.label} {name}")
        syscall = th.syscall or "–"
        if (
            th.syscall_nr is not None
            and th.syscall
            and th.syscall.startswith("nr_") is False
            and th.syscall not in ("running", "none")
        ):
            syscall = f"{th.syscall} ({th.syscall_nr})"
        rows.append(
            ThreadRow(
                tid=th.tid,
                name=name,
                state=th.state,
                wchan=th.wchan or "–",
                syscall=syscall,
                futex=f_label,
                futex_anchor=f_anchor,
                cpu_delta_ticks=delta,
                cpu_pct=f"{delta / clk / span * 100:.0f}%" if span > 0 else "–",
                top=top(reg.get(th.stack_id)),
                stack_anchor=s_anchor,
            )
        )
    note = f"{len(last.threads)} threads in the last sample"
    if len(last.threads) > MAX_THREAD_ROWS:
        note += f"; the first {MAX_THREAD_ROWS} are listed"
    return tuple(rows), note


def _py_threads(proc: Proc, reg: StackRegistry) -> Tuple[PyThreadView, ...]:
    seq: Dict[int, List[Tuple[int, str]]] = {}
    names: Dict[int, str] = {}
    for i, ps in proc.samples:
        for th in ps.threads:
            if th.stack_id is not None:
                seq.setdefault(th.tid, []).append((i, th.stack_id))
                names[th.tid] = th.py_thread_name or th.name
    out = []
    for tid, items in seq.items():
        runs: List[Tuple[int, int, str]] = []
        for i, sid in items:
            if runs and runs[-1][2] == sid:
                runs[-1] = (runs[-1][0], i, sid)
            else:
                runs.append((i, i, sid))
        views = []
        for n, (a, b, sid) in enumerate(runs):
            anchor, label = reg.ref(sid, f"{proc.label} {names[tid]}")
            prev, cur = reg.get(runs[n - 1][2]) if n else None, reg.get(sid)
            views.append(
                StackRun(
                    samples=str(a) if a == b else f"{a}–{b}",
                    stack_anchor=anchor,
                    stack_label=label or "?",
                    top=top(cur),
                    change=change(prev, cur) if prev is not None and cur is not None else "",
                )
            )
        note = ""
        if len(views) > MAX_RUNS:
            note = f"{len(views) - MAX_RUNS} of {len(views)} stack runs not shown"
            views = views[:4] + views[-(MAX_RUNS - 4) :]
        out.append(
            PyThreadView(
                name=names[tid], tid=tid, runs=tuple(views), changes=len(runs) - 1, note=note
            )
        )
    out.sort(key=lambda v: (v.tid != proc.key[1], v.name != "MainThread", v.tid))
    return tuple(out)


def _native(last: ProcessSample) -> Tuple[Tuple[NativeGroup, ...], int]:
    counts: Dict[Tuple[str, str, str], int] = {}
    for th in last.threads:
        if th.stack_id is None:
            key = (th.name, th.state, th.wchan or "–")
            counts[key] = counts.get(key, 0) + 1
    groups = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(NativeGroup(count=c, name=k[0], state=k[1], wchan=k[2]) for k, c in groups), sum(
        counts.values()
    )


def _facts(index: BundleIndex, proc: Proc) -> Tuple[Tuple[str, str], ...]:
    info, last = proc.info, proc.last
    facts: List[Tuple[str, str]] = [("pid", str(proc.key[1]))]
    if proc.key[0]:
        facts.append(("host", proc.key[0]))
    if info.ppid is not None:
        facts.append(("parent pid", str(info.ppid)))
    facts.append(("role", info.role))
    if info.rank is not None:
        facts.append(
            ("rank", f"{info.rank} of {info.world_size or '?'} (from {info.rank_source or '?'})")
        )
    if info.local_rank is not None:
        facts.append(("local rank", str(info.local_rank)))
    facts.append(("name", info.name or "?"))
    if last is not None:
        facts.append(("status", f"{last.status}, state {last.state}"))
        facts.append(("RSS", fmt.size(last.rss_bytes)))
        facts.append(("threads", str(last.num_threads or len(last.threads))))
        reused = sum(1 for _, s in proc.samples if s.stacks_reused)
        stacks_fact = last.py_status
        readers = sorted({s.stack_reader for _, s in proc.samples if s.stack_reader})
        if readers:
            stacks_fact += f", read by {' and '.join(readers)}"
        if reused:
            stacks_fact += (
                f" (not read again in {reused} sample{'s' if reused != 1 else ''}: "
                "no thread ran since the previous dump, so the stacks are the same)"
            )
        facts.append(("Python stacks", stacks_fact))
        if last.listen_ports:
            facts.append(("listening on", ", ".join(str(p) for p in last.listen_ports)))
        if last.exit_code is not None:
            facts.append(("exit code", str(last.exit_code)))
        facts.append(
            (
                "samples",
                f"{len(proc.samples)} (first {proc.samples[0][0]}, last {proc.samples[-1][0]})",
            )
        )
    if info.start_time_s:
        facts.append(("started", fmt.utc(info.start_time_s)))
    return tuple(facts)


def build_ranks(
    index: BundleIndex, reg: StackRegistry, futex: Dict[FutexKey, Tuple[str, str]]
) -> Tuple[RankView, ...]:
    out = []
    for proc in index.procs:
        last = next((ps for _, ps in reversed(proc.samples) if ps.threads), proc.last)
        if last is not None:
            threads, threads_note = _thread_rows(index, proc, last, reg, futex)
            native, native_count = _native(last)
        else:
            threads, threads_note, native, native_count = (), "never sampled", (), 0
        py_threads = _py_threads(proc, reg)
        main = next((v for v in py_threads if v.tid == proc.key[1] or v.name == "MainThread"), None)
        out.append(
            RankView(
                anchor=proc.anchor,
                title=f"{proc.label} · pid {proc.key[1]}"
                + (f" · {proc.key[0]}" if proc.key[0] else ""),
                host=proc.key[0],
                pid=proc.key[1],
                rank=proc.info.rank,
                suspect=proc.is_suspect,
                suspect_reason=proc.suspect_reason or "",
                status=proc.last.status if proc.last is not None else "not sampled",
                facts=_facts(index, proc),
                threads=threads,
                threads_note=threads_note,
                py_threads=py_threads,
                native=native,
                native_count=native_count,
                main_stack_anchor=main.runs[-1].stack_anchor if main and main.runs else "",
                badge=proc.badge,
            )
        )
    return tuple(out)


__all__ = ["Key", "build_futex_groups", "build_ranks", "futex_op_text"]
