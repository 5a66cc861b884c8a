"""What a starting job is doing per rank, how far it is, when it will be done - and whether a
framework timeout will kill it first.

Pure functions of the sample series. Per rank, a *phase* with the evidence that shows it:

- ``loading weights``: a weights file (``*.safetensors``, ``*.bin``, ``*.pt`` ...) open or
  mapped, or loader frames (safetensors, ``torch.load``, ``load_state_dict``,
  ``from_pretrained``, ``load_weights``);
- ``converting weights``: ``dequant*`` / ``quantize*`` / ``convert_*`` frames,
  ``process_weights_after_loading``;
- ``compiling``: torch._dynamo / torch._inductor compile frames, triton's compiler, a compiler
  child (g++, cc1plus, ld, nvcc, ptxas), "Capturing CUDA graphs";
- ``initialising communication``: ``init_process_group``, rendezvous, a TCPStore wait,
  ``init_distributed_environment``;
- ``downloading``: a file open for writing that grows, or hub download frames;
- ``warming up``: ``profile_run`` / ``_dummy_run`` frames, "Memory profiling takes";
- and, beside a rank in one of those, ``serving`` (a listening event loop) or ``waiting`` (in a
  collective: the ranks that wait for the loader).

Progress comes from the files (fdinfo ``pos`` / size for a ``read()`` loader, resident / size
of the mapping for an mmap loader, shard *i* of *N* from ``model-00004-of-00012`` names) or a
tqdm bar in the rank's log. The rate over the capture gives the ETA, with its basis in words. No
movement over the capture gives no ETA: a real hang is never reported with one.

The kill budget is read from each rank's argv and allowlisted env (SGLang
``--watchdog-timeout``, ``VLLM_RPC_TIMEOUT``, ``VLLM_ENGINE_ITERATION_TIMEOUT_S``,
``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC``, Slurm's ``SLURM_JOB_END_TIME``); an ETA that runs past one
becomes a warning that names the knob.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from diag.frameworks import union
from diag.model import Bundle, LogSample, OpenFile, ProcessInfo, ProcessSample, RankPhase
from diag.text.units import size
from diag.verdict.features import ProcSignals, frames_of
from diag.verdict.startup_frames import (
    clear_names_facts,
    compile_frames,
    convert_frames,
    frame_named,
    loader_frames,
    names_fact,
)
from diag.verdict.startup_signs import (
    _COMPILE_LOG,
    _DOWNLOAD_NAMES,
    _INIT_NAMES,
    _LOG_SUFFIXES,
    _WARMUP_LOG,
    _WARMUP_NAMES,
    COMPILERS,
    COMPILING,
    CONVERTING,
    DOWNLOADING,
    INIT_COMM,
    LOADING,
    MIN_MOVE_BYTES,
    SERVING,
    WAITING,
    WARMUP,
    Tqdm,
    _done,
    eta_words,
    file_totals,
    is_weights,
    last_tqdm,
    looks_downloaded,
)
from diag.verdict.waits import PEER, SERVE, short_name
from diag.vocab import StartupPhase


@dataclass
class _Proc:
    sig: ProcSignals
    alive: List[Tuple[float, ProcessSample]]
    names: List[Tuple[str, str]]  # (short frame name, filename) of every thread, last sample
    children: List[ProcessInfo]  # alive compiler children
    logs_first: List[LogSample]
    logs_last: List[LogSample]

    @property
    def first(self) -> ProcessSample:
        return self.alive[0][1]

    @property
    def last(self) -> ProcessSample:
        return self.alive[-1][1]

    @property
    def span_s(self) -> float:
        return self.alive[-1][0] - self.alive[0][0]


def _series(bundle: Bundle) -> Dict[Tuple[str, int], List[Tuple[float, ProcessSample]]]:
    out: Dict[Tuple[str, int], List[Tuple[float, ProcessSample]]] = {}
    for sample in bundle.samples:
        for ps in sample.processes:
            if ps.status == "alive":
                out.setdefault((ps.host, ps.pid), []).append((ps.t_s or sample.t_s, ps))
    return out


def _is_compiler(info: ProcessInfo) -> bool:
    name = info.name.rsplit("/", 1)[-1]
    argv0 = info.cmdline[0].rsplit("/", 1)[-1] if info.cmdline else ""
    if name in COMPILERS or argv0 in COMPILERS or re.match(r"^(?:\w+-)*(?:gcc|g\+\+)", argv0):
        return True
    joined = " ".join(info.cmdline[:4])
    return any(
        word in joined and any(w in joined for w in also) for word, also in union.COMPILE_ARGV
    )


def _compiler(info: ProcessInfo, seen: Dict[Tuple[str, Tuple[str, ...]], bool]) -> bool:
    """``_is_compiler``, once per name and argv: 16,384 ranks run one command line."""
    key = (info.name, info.cmdline[:4])
    found = seen.get(key)
    if found is None:
        found = seen[key] = _is_compiler(info)
    return found


Kids = Dict[Tuple[str, int], List[ProcessInfo]]


def _kids(infos: Sequence[ProcessInfo]) -> Kids:
    """(host, ppid) -> children: built once per bundle (per process, it was quadratic)."""
    kids: Kids = {}
    for info in infos:
        if info.ppid is not None:
            kids.setdefault((info.host, info.ppid), []).append(info)
    return kids


def _descendants(kids: Kids, key: Tuple[str, int]) -> List[ProcessInfo]:
    out: List[ProcessInfo] = []
    stack = [key]
    while stack and len(out) < 256:
        for child in kids.get(stack.pop(), ()):
            out.append(child)
            stack.append((child.host, child.pid))
    return out


def _logs_by_host(logs: Sequence[LogSample]) -> Dict[str, List[LogSample]]:
    out: Dict[str, List[LogSample]] = {}
    for lg in logs:
        out.setdefault(lg.host, []).append(lg)
    return out


def _logs_for(
    sample_logs: Sequence[LogSample], pid: int, host: str, alone: bool
) -> List[LogSample]:
    return [
        lg for lg in sample_logs if lg.host == host and (pid in lg.pids or (alone and not lg.pids))
    ]


def _procs(bundle: Bundle, procs: Sequence[ProcSignals]) -> List[_Proc]:
    series = _series(bundle)
    alive_keys = {(ps.host, ps.pid) for ps in bundle.samples[-1].processes if ps.status == "alive"}
    ranked = any(p.rank is not None for p in procs)
    compiler: Dict[Tuple[str, Tuple[str, ...]], bool] = {}  # by what _is_compiler reads
    cands = [
        p
        for p in procs
        if not p.dead
        and p.key in series
        and not _compiler(p.info, compiler)
        and p.info.role != "helper"
        # A launcher of ranks is not one; a lone root with children (a rank running g++) is.
        and not (p.info.role == "launcher" and ranked)
    ]
    alone = len(cands) == 1
    first_logs = _logs_by_host(bundle.samples[0].logs)
    last_logs = _logs_by_host(bundle.samples[-1].logs)
    kids = _kids(bundle.processes)
    out: List[_Proc] = []
    # The frames of a process's last sample, once per class of processes that read the same
    # (``ProcSignals.series_class``): 300 threads' stacks per rank of 16,384 is 3 s.
    names_of: Dict[int, List[Tuple[str, str]]] = {}
    for p in cands:
        alive = series[p.key]
        last = alive[-1][1]
        names = names_of.get(p.series_class) if p.series_class is not None else None
        if names is None:
            names = [
                (short_name(f.name), f.filename)
                for t in last.threads
                for f in frames_of(bundle, t.stack_id)
            ]
            if p.series_class is not None:
                names_of[p.series_class] = names
        children = [
            c
            for c in _descendants(kids, p.key)
            if _compiler(c, compiler) and (c.host, c.pid) in alive_keys
        ]
        out.append(
            _Proc(
                sig=p,
                alive=alive,
                names=names,
                children=children,
                logs_first=_logs_for(first_logs.get(p.key[0], []), p.pid, p.key[0], alone),
                logs_last=_logs_for(last_logs.get(p.key[0], []), p.pid, p.key[0], alone),
            )
        )
    return out


def _compile_evidence(p: _Proc) -> Optional[str]:
    if p.children:
        kids = ", ".join(f"{c.name or '?'} (pid {c.pid})" for c in p.children[:3])
        return f"compiler child {kids}"
    found = names_fact("compile", p.names, compile_frames)
    if found:
        return found
    line = _last_line(p)
    if line and _COMPILE_LOG.search(line):
        return f"log: {line[:80]}"
    return None


def _last_line(p: _Proc) -> str:
    for lg in p.logs_last:
        for line in reversed(lg.tail):
            if line.strip():
                return line.strip()
    return ""


def _convert_evidence(p: _Proc) -> Optional[str]:
    return names_fact("convert", p.names, convert_frames)


def _loader_frame(p: _Proc) -> Optional[str]:
    return names_fact("loader", p.names, loader_frames)


def _weight_files(ps: ProcessSample) -> List[OpenFile]:
    """The weights files of one sample, one entry per path: a file both open and mapped (a
    loader parses the header through an fd, then maps it) counts by the view that got furthest
    (the mapping on a tie)."""
    best: Dict[str, OpenFile] = {}
    for f in ps.open_files:
        if f.kind not in ("read", "mmap") or not is_weights(f.path):
            continue
        had = best.get(f.path)
        if had is None or (_done(f), f.kind == "mmap") > (_done(had), had.kind == "mmap"):
            best[f.path] = f
    return list(best.values())


def _growing_writes(p: _Proc) -> List[Tuple[OpenFile, int]]:
    before = {f.path: f.size_bytes for f in p.first.open_files if f.kind == "write"}
    out = []
    for f in p.last.open_files:
        if f.kind != "write" or f.path.lower().endswith(_LOG_SUFFIXES):
            continue
        grown = f.size_bytes - before.get(f.path, f.size_bytes)
        if grown >= MIN_MOVE_BYTES or (f.path not in before and len(p.alive) > 1):
            out.append((f, max(0, grown)))
    return out


def _phase(p: _Proc, bar: Optional[Tqdm]) -> Optional[Tuple[StartupPhase, str]]:
    """The phase of one process and what shows it; None when it is in none."""
    desc = bar.desc.lower() if bar else ""
    evidence = _compile_evidence(p)
    if evidence or (bar and ("compil" in desc or "capturing" in desc)):
        return COMPILING, evidence or f"tqdm: {bar.desc if bar else ''}"
    evidence = _convert_evidence(p)
    if evidence:
        return CONVERTING, evidence
    files = _weight_files(p.last)
    loader = _loader_frame(p)
    unfinished = [f for f in files if _done(f) < f.size_bytes]
    if loader or unfinished or (bar and "load" in desc):
        parts = []
        if files:
            f = (unfinished or files)[0]
            how = "mapped" if f.kind == "mmap" else "open"
            more = f" (+{len(files) - 1} more)" if len(files) > 1 else ""
            parts.append(f"{f.path.rsplit('/', 1)[-1]} ({size(f.size_bytes)}) {how}{more}")
        if loader:
            parts.append(f"frame `{loader}`")
        if bar and not parts:
            parts.append(f"tqdm: {bar.desc}")
        return LOADING, ", ".join(parts)
    dl = names_fact("download", p.names, lambda n: frame_named(n, _DOWNLOAD_NAMES))
    writes = [w for w in _growing_writes(p) if dl or looks_downloaded(w[0].path)]
    if writes or dl or (bar and ("download" in desc or "fetching" in desc or is_weights(desc))):
        if writes:
            f, grown = writes[0]
            text = f"{f.path.rsplit('/', 1)[-1]} grows (+{size(grown)})"
        else:
            text = f"frame `{dl}`" if dl else f"tqdm: {bar.desc if bar else ''}"
        return DOWNLOADING, text
    init = names_fact("init", p.names, lambda n: frame_named(n, _INIT_NAMES))
    wait = p.sig.main_wait
    if init or (wait is not None and wait.kind == "rendezvous"):
        return INIT_COMM, f"frame `{init or (wait.label if wait else '')}`"
    warm = names_fact("warm", p.names, lambda n: frame_named(n, _WARMUP_NAMES))
    line = _last_line(p)
    if warm or (line and _WARMUP_LOG.search(line)):
        return WARMUP, f"frame `{warm}`" if warm else f"log: {line[:80]}"
    return None


class Progress(NamedTuple):
    pct: Optional[float]
    eta_s: Optional[float]
    basis: str
    elapsed_s: Optional[float]  # how long the phase has run, as far as can be told


def _file_progress(p: _Proc) -> Optional[Progress]:
    last_files = _weight_files(p.last)
    if not last_files:
        return None
    done, total, note = file_totals(last_files)
    if total <= 0:
        return None
    pct = 100.0 * done / total
    how = "mapped and resident" if all(f.kind == "mmap" for f in last_files) else "read"
    where = f" ({note})" if note else ""
    # The bytes that moved over the capture, file by file (a shard that closed counts whole).
    first = {f.path: f for f in _weight_files(p.first)}
    seen = {f.path for f in last_files}
    moved = sum(
        _done(f) - _done(first[f.path]) if f.path in first else _done(f) for f in last_files
    )
    # A file read through and closed since the first sample counts whole (the next shard).
    moved += sum(
        f.size_bytes - _done(f)
        for path, f in first.items()
        if path not in seen and f.kind == "read"
    )
    span = p.span_s
    if len(p.alive) < 2 or span <= 0:
        return Progress(
            pct, None, f"{size(done)} of {size(total)} {how}{where}; one sample: no rate", None
        )
    if moved < MIN_MOVE_BYTES:
        return Progress(
            pct,
            None,
            f"{size(done)} of {size(total)} {how}{where}; nothing moved in {span:.0f} s",
            None,
        )
    rate = moved / span
    remaining = max(0, total - done)
    eta = remaining / rate
    basis = f"at {size(rate)}/s, {eta_words(eta)} for the remaining {size(remaining)}{where}"
    return Progress(pct, eta, basis, done / rate)


def _bar_for(logs: Sequence[LogSample]) -> Tuple[Optional[Tqdm], Optional[LogSample]]:
    for lg in logs:
        bar = last_tqdm(lg.tail)
        if bar is not None:
            return bar, lg
    return None, None


def _working(sig: ProcSignals) -> bool:
    return bool(sig.compute_intervals or sig.read_delta_bytes or sig.rss_delta_bytes > 0)


def _bar_shows_phase(p: _Proc, bar: Optional[Tqdm], log: Optional[LogSample]) -> bool:
    """A bar is evidence of a start-up phase unless the capture saw it redrawn (its log grew,
    its elapsed time moved) at the same n while its process did nothing: a keep-alive thread
    refreshing the bar of a load that stopped - no sign the job is still starting, and
    "don't kill it" would be a guess. A bar left as it was is a phase parked between steps."""
    if bar is None or log is None or len(p.alive) < 2:
        return bar is not None
    first = [lg for lg in p.logs_first if lg.path == log.path]
    before, _ = _bar_for(first)
    if before is None or (before.n, before.total) != (bar.n, bar.total):
        return True
    redrawn = before.text != bar.text or any(lg.size_bytes < log.size_bytes for lg in first)
    return not redrawn or _working(p.sig)


def _tqdm_progress(p: _Proc, bar: Tqdm, log: LogSample, t_last: float) -> Progress:
    before, _ = _bar_for([lg for lg in p.logs_first if lg.path == log.path])
    moved = before is not None and bar.n > before.n and len(p.alive) > 1
    per_item = bar.elapsed_s / bar.n if bar.n > 0 else None
    stale_s = max(0.0, t_last - log.mtime_s) if log.mtime_s else 0.0
    working = _working(p.sig)
    fresh = per_item is not None and stale_s <= max(2 * per_item, 5.0) and working
    text = f"tqdm {int(bar.n)}/{int(bar.total)}"
    if bar.remaining_s is None or not (moved or (fresh and len(p.alive) > 1)):
        why = f"bar unchanged for {stale_s:.0f} s" if stale_s else "the bar did not move"
        return Progress(bar.pct, None, f"{text}; {why}", bar.elapsed_s)
    eta = max(0.0, bar.remaining_s - stale_s)
    left = bar.text.split("<", 1)[-1].split(",", 1)[0].split("]", 1)[0]
    return Progress(bar.pct, eta, f"{text}: {left} left", bar.elapsed_s + stale_s)


def _progress(
    p: _Proc, phase: StartupPhase, bar: Optional[Tqdm], log: Optional[LogSample], t_last: float
) -> Progress:
    by_bar = _tqdm_progress(p, bar, log, t_last) if bar is not None and log is not None else None
    if by_bar is not None and by_bar.eta_s is not None:
        return by_bar
    by_files = _file_progress(p) if phase == LOADING else None
    if by_files is not None and (by_files.eta_s is not None or by_bar is None):
        return by_files
    return by_bar or Progress(None, None, "", None)


def _label(phase: RankPhase, names: Optional[Dict[int, str]] = None) -> str:
    """ "rank 0", "pid 4242", or the framework's name ("scheduler (pid 4242)")."""
    if names and phase.pid in names:
        return names[phase.pid]
    return f"rank {phase.rank}" if phase.rank is not None else f"pid {phase.pid}"


class StartupPhases(NamedTuple):
    """The start-up phases of a capture's processes (``startup_phases``): measured once per
    verdict (``Situation.startup``), read by the measures, the rules and the classifier."""

    phases: Tuple[RankPhase, ...]
    elapsed: Dict[int, Optional[float]]  # per pid, how long its phase has run (when known)


def startup_phases(bundle: Bundle, procs: Sequence[ProcSignals]) -> StartupPhases:
    """The phase of every rank in a startup phase, plus the ranks that serve or wait beside
    them; and per pid how long its phase has run (when known)."""
    if not bundle.samples:
        return StartupPhases((), {})
    clear_names_facts()
    try:
        return _startup_phases(bundle, procs)
    finally:
        clear_names_facts()


def _startup_phases(bundle: Bundle, procs: Sequence[ProcSignals]) -> StartupPhases:
    t_last = bundle.samples[-1].t_s
    found: List[RankPhase] = []
    others: List[RankPhase] = []
    elapsed: Dict[int, Optional[float]] = {}
    for p in _procs(bundle, procs):
        bar, log = _bar_for(p.logs_last)
        seen = _phase(p, bar if _bar_shows_phase(p, bar, log) else None)
        rank, pid, host = p.sig.rank, p.sig.pid, p.sig.key[0]
        if seen is not None:
            phase, evidence = seen
            prog = _progress(p, phase, bar, log, p.alive[-1][0] or t_last)
            pct = round(prog.pct, 1) if prog.pct is not None else None
            eta = round(prog.eta_s, 1) if prog.eta_s is not None else None
            found.append(
                RankPhase(
                    rank=rank,
                    pid=pid,
                    host=host,
                    phase=phase,
                    progress_pct=pct,
                    eta_s=eta,
                    basis=prog.basis,
                    evidence=evidence,
                )
            )
            elapsed[p.sig.pid] = prog.elapsed_s
            continue
        family = p.sig.main_family
        wait = p.sig.main_wait
        if family == PEER and wait is not None:
            evidence = f"wait in {short_name(wait.label)}"
            others.append(
                RankPhase(rank=rank, pid=pid, host=host, phase=WAITING, evidence=evidence)
            )
        elif family == SERVE and p.sig.listen_ports:
            ports = ", ".join(f":{x}" for x in p.sig.listen_ports[:3])
            evidence = f"listens on {ports}"
            others.append(
                RankPhase(rank=rank, pid=pid, host=host, phase=SERVING, evidence=evidence)
            )
    if not found:
        return StartupPhases((), {})
    key = lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.pid)  # noqa: E731
    return StartupPhases(tuple(sorted(found, key=key)) + tuple(sorted(others, key=key)), elapsed)


def phase_phrase(phase: RankPhase, names: Optional[Dict[int, str]] = None) -> str:
    """``rank 0 loading weights 62%, ETA ~3 min (at 1.1 GiB/s)``."""
    text = f"{_label(phase, names)} {phase.phase}"
    if phase.progress_pct is not None:
        text += f" {phase.progress_pct:.0f}%"
    if phase.eta_s is not None:
        rate = phase.basis.split(",", 1)[0] if phase.basis.startswith("at ") else phase.basis
        text += f", ETA {eta_words(phase.eta_s)} ({rate})"
    elif phase.phase in (LOADING, DOWNLOADING) and phase.progress_pct is not None:
        text += ", no progress over the capture (no ETA)"
    return text
