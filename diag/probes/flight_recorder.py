"""PyTorch Flight Recorder dumps: find them, read them (JSON or pickle), per rank and group.

Flight Recorder keeps a ring buffer of every collective a rank enqueued (``TORCH_FR_BUFFER_SIZE``,
formerly ``TORCH_NCCL_TRACE_BUFFER_SIZE``) and, on a NCCL watchdog timeout, writes it to
``<prefix><rank>`` where the prefix is ``TORCH_FR_DUMP_TEMP_FILE`` (formerly
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, default ``/tmp/nccl_trace_rank_``). The file is a pickle
(``_dump_fr_trace``) or JSON (``_dump_fr_trace_json``); both hold ``entries`` (with
``collective_seq_id``, ``profiling_name`` such as ``nccl:all_reduce``, ``state``,
``process_group`` = [name, desc], ``time_created_ns``), ``pg_status`` (last enqueued / started /
completed per group; ints in pickle, strings in JSON) and ``pg_config`` (the ranks of a group).

Pickles are read with an unpickler that refuses every class: torch writes only dicts, lists,
tuples, strings and numbers, and a dump file on a shared /tmp must not be able to run code.
Dumps older than the process that would have written them are stale (a previous job) and are
skipped; files in an explicit ``--fr-dir`` are all read.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import msgspec

from diag.model import Bundle, CollectiveRecord, ProbeFailure, ProcessInfo, RankCollectives
from diag.probes.runner import ProbeCall, run_all

DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
PREFIX_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
RECENT_ENTRIES = 6
MAX_DUMP_BYTES = 256 * 1024 * 1024
_RANK_SUFFIX = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d+)(?:\.json|\.pkl|\.pickle)?$")


class DumpError(Exception):
    """A file that is not a readable Flight Recorder dump."""


class _NoClassUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a dump")


def decode_dump(data: bytes) -> Dict[str, Any]:
    """Bytes of a dump (JSON or pickle) → the dump dict (pure; raises DumpError)."""
    head = data.lstrip()[:1]
    try:
        if head == b"{":
            obj = json.loads(data.decode("utf-8", "replace"))
        else:
            obj = _NoClassUnpickler(io.BytesIO(data)).load()
    except (ValueError, pickle.UnpicklingError, EOFError, TypeError, AttributeError) as exc:
        raise DumpError(f"not a Flight Recorder dump: {exc}") from exc
    if not isinstance(obj, dict) or not isinstance(obj.get("entries"), list):
        raise DumpError("not a Flight Recorder dump: no 'entries' list")
    return obj


def _int(value: Any) -> Optional[int]:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def _ranks_of(text: Any) -> Tuple[int, ...]:
    if isinstance(text, (list, tuple)):
        return tuple(int(r) for r in text)
    return tuple(int(r) for r in re.findall(r"-?\d+", str(text or "")))


def _pg_of(entry: Mapping[str, Any]) -> str:
    group = entry.get("process_group")
    if isinstance(group, (list, tuple)) and group:
        return str(group[0])
    return str(entry.get("pg_id", ""))


def _record(entry: Mapping[str, Any]) -> CollectiveRecord:
    p2p = bool(entry.get("is_p2p", False))
    seq = _int(entry.get("p2p_seq_id" if p2p else "collective_seq_id")) or 0
    created_ns = _int(entry.get("time_created_ns"))
    sizes = entry.get("input_sizes")
    return CollectiveRecord(
        seq=seq,
        op=str(entry.get("profiling_name", "?")),
        state=str(entry.get("state", "")),
        is_p2p=p2p,
        created_s=created_ns / 1e9 if created_ns else None,
        sizes=json.dumps(sizes, separators=(",", ":"))[:120] if sizes else "",
    )


def summarize_dump(
    dump: Mapping[str, Any],
    rank: int,
    source: str = "",
    dumped_s: Optional[float] = None,
    pid: Optional[int] = None,
    host: str = "",
) -> Tuple[RankCollectives, ...]:
    """One rank's dump → one record per process group it used (pure)."""
    by_pg: Dict[str, List[Mapping[str, Any]]] = {}
    pg_ids: Dict[str, str] = {}
    for entry in dump.get("entries", []):
        if not isinstance(entry, Mapping):
            continue
        pg = _pg_of(entry)
        by_pg.setdefault(pg, []).append(entry)
        pg_ids.setdefault(pg, str(entry.get("pg_id", pg)))
    status: Mapping[str, Any] = dump.get("pg_status") or {}
    config: Mapping[str, Any] = dump.get("pg_config") or {}
    covered = set(pg_ids.values())
    for pg_key in status:  # groups this rank joined but has no entry for in the ring
        if str(pg_key) not in covered:
            by_pg.setdefault(str(pg_key), [])
    out: List[RankCollectives] = []
    for pg, entries in sorted(by_pg.items()):
        pg_status = status.get(pg_ids.get(pg, pg)) or status.get(pg) or {}
        pg_config = config.get(pg)
        if pg_config is None and len(config) == 1:
            pg_config = next(iter(config.values()))
        entries_sorted = sorted(entries, key=lambda e: _int(e.get("record_id")) or 0)
        recent = tuple(_record(e) for e in entries_sorted[-RECENT_ENTRIES:])
        out.append(
            RankCollectives(
                rank=rank,
                pg=pg,
                pg_ranks=_ranks_of(pg_config.get("ranks"))
                if isinstance(pg_config, Mapping)
                else (),
                host=host,
                pid=pid,
                source=source,
                dumped_s=dumped_s,
                last_enqueued_seq=_int(pg_status.get("last_enqueued_collective")),
                last_started_seq=_int(pg_status.get("last_started_collective")),
                last_completed_seq=_int(pg_status.get("last_completed_collective")),
                recent=recent,
            )
        )
    return tuple(out)


def read_dump_file(path: Path) -> Tuple[Dict[str, Any], float]:
    """(dump, mtime) of one file; OSError or DumpError when unreadable."""
    stat = path.stat()
    if stat.st_size > MAX_DUMP_BYTES:
        raise DumpError(f"{path} is {stat.st_size} bytes, over the {MAX_DUMP_BYTES} limit")
    return decode_dump(path.read_bytes()), stat.st_mtime


def prefixes_of(info: ProcessInfo) -> Tuple[str, ...]:
    """The dump prefixes a rank would write to, from its environment (or torch's default)."""
    found = tuple(info.env[v] for v in PREFIX_VARS if info.env.get(v))
    return found or (DEFAULT_PREFIX,)


def candidates(
    processes: Sequence[ProcessInfo], fr_dirs: Sequence[str] = ()
) -> List[Tuple[Path, int, Optional[ProcessInfo], bool]]:
    """Dump files to look at: ``<prefix><rank>`` per rank, plus every ``*<N>`` in --fr-dir."""
    out: List[Tuple[Path, int, Optional[ProcessInfo], bool]] = []
    seen: Set[str] = set()
    by_rank = {p.rank: p for p in processes if p.rank is not None}
    for directory in fr_dirs:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            match = _RANK_SUFFIX.match(name)
            if not match or not os.path.isfile(os.path.join(directory, name)):
                continue
            rank = int(match.group("rank"))
            path = Path(directory, name)
            seen.add(str(path))
            out.append((path, rank, by_rank.get(rank), True))
    for info in processes:
        if info.rank is None:
            continue
        for prefix in prefixes_of(info):
            path = Path(f"{prefix}{info.rank}")
            if str(path) not in seen and path.is_file():
                seen.add(str(path))
                out.append((path, info.rank, info, False))
    return out


def collect(
    processes: Sequence[ProcessInfo], fr_dirs: Sequence[str] = (), host: str = ""
) -> Tuple[Tuple[RankCollectives, ...], Tuple[str, ...]]:
    """Read every dump found: (records, problems). A problem is one line, not an exception."""
    records: List[RankCollectives] = []
    problems: List[str] = []
    for path, rank, info, explicit in candidates(processes, fr_dirs):
        try:
            dump, mtime = read_dump_file(path)
        except (OSError, DumpError) as exc:
            if explicit or info is not None:
                problems.append(f"{path}: {exc}")
            continue
        started = info.start_time_s if info is not None else None
        if not explicit and started is not None and mtime < started:
            continue  # written by an earlier job that used the same prefix
        records.extend(
            summarize_dump(
                dump,
                rank,
                source=str(path),
                dumped_s=mtime,
                pid=info.pid if info is not None else None,
                host=host,
            )
        )
    return tuple(records), tuple(problems)


def merge_records(*groups: Iterable[RankCollectives]) -> Tuple[RankCollectives, ...]:
    """Keep the newest record per (host, rank, group) - a dump rewritten later wins."""
    best: Dict[Tuple[str, int, str], RankCollectives] = {}
    for group in groups:
        for rec in group:
            key = (rec.host, rec.rank, rec.pg)
            old = best.get(key)
            if old is None or (rec.dumped_s or 0.0) >= (old.dumped_s or 0.0):
                best[key] = rec
    return tuple(sorted(best.values(), key=lambda r: (r.host, r.pg, r.rank)))


def enrich_bundle(
    bundle: Bundle,
    fr_dirs: Sequence[str] = (),
    scrub: Callable[[str], str] = str,
    timeout_s: float = 20.0,
) -> Bundle:
    """End of a capture or watch: attach the Flight Recorder dumps and the NCCL log summary.

    Both reads run under the runner's timeout (a dump on a hung NFS mount must not hang diag);
    a failure or an unreadable dump becomes a ``ProbeFailure`` in the bundle, never an error.
    """
    from diag.probes import nccl_logs  # here: nccl_logs is a sibling probe, not a dependency

    fr_call = ProbeCall("flight-recorder", partial(collect, bundle.processes, fr_dirs), timeout_s)
    log_call = ProbeCall(
        "nccl-logs",
        partial(nccl_logs.collect, bundle.samples, bundle.processes, scrub),
        timeout_s,
    )
    calls: List[ProbeCall[Any]] = [fr_call, log_call]
    fr_result, log_result = run_all(calls)
    failures = [r.failure for r in (fr_result, log_result) if r.failure is not None]
    records: Tuple[RankCollectives, ...] = bundle.collectives
    if fr_result.value is not None:
        found, problems = fr_result.value
        records = merge_records(bundle.collectives, found)
        failures += [ProbeFailure(probe="flight-recorder", reason=p) for p in problems]
    logs = log_result.value if log_result.value is not None else bundle.nccl_logs
    return msgspec.structs.replace(
        bundle,
        collectives=records,
        nccl_logs=logs,
        failures=(*bundle.failures, *failures),
    )


class FrTracker:
    """A watch's view of the dumps: re-read only when one appears or changes (stat per sample).

    torch writes the dumps when the watchdog fires, possibly hours into a watch, so the
    watch looks each sample; ``attach`` puts the current records on the bundle it is given.
    """

    def __init__(self, fr_dirs: Sequence[str] = (), timeout_s: float = 10.0) -> None:
        self.fr_dirs = tuple(fr_dirs)
        self.timeout_s = timeout_s
        self._seen: Dict[str, Tuple[float, int]] = {}
        self._records: Tuple[RankCollectives, ...] = ()

    def _changed(self, processes: Sequence[ProcessInfo]) -> bool:
        now: Dict[str, Tuple[float, int]] = {}
        for path, _rank, _info, _explicit in candidates(processes, self.fr_dirs):
            try:
                st = path.stat()
            except OSError:
                continue
            now[str(path)] = (st.st_mtime, st.st_size)
        changed = now != self._seen
        self._seen = now
        return changed

    def attach(self, bundle: Bundle) -> Bundle:
        calls: List[ProbeCall[Any]] = [
            ProbeCall("flight-recorder", partial(self._refresh, bundle.processes), self.timeout_s)
        ]
        run_all(calls)  # a hung filesystem costs one timeout, the last records are kept
        if not self._records:
            return bundle
        return msgspec.structs.replace(
            bundle, collectives=merge_records(bundle.collectives, self._records)
        )

    def _refresh(self, processes: Sequence[ProcessInfo]) -> None:
        if self._changed(processes):
            self._records = collect(processes, self.fr_dirs)[0]
