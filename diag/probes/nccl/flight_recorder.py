"""PyTorch Flight Recorder dumps: find them, read them (JSON or pickle), per rank and group.

Flight Recorder keeps a ring buffer of every collective a rank enqueued (``TORCH_FR_BUFFER_SIZE``,
formerly ``TORCH_NCCL_TRACE_BUFFER_SIZE``) and, on a NCCL watchdog timeout, writes it to
``<prefix><rank>`` where the prefix is ``TORCH_FR_DUMP_TEMP_FILE`` (formerly
``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, default ``/tmp/nccl_trace_rank_``). The file is a pickle
(``_dump_fr_trace``) or JSON (``_dump_fr_trace_json``); both hold ``entries`` (with
``collective_seq_id``, ``profiling_name`` such as ``nccl:all_reduce``, ``state``,
``process_group`` = [name, desc], ``time_created_ns``), ``pg_status`` (last enqueued / started /
completed per group; ints in pickle, strings in JSON) and ``pg_config`` (the ranks of a group).

Decoding a dump (safely: no class is ever unpickled) is ``diag.probes.nccl.fr_dump``; this module
finds the files, reads them under the probe timeout and keeps a watch's view current. Dumps
older than the process that would have written them are stale (a previous job) and are
skipped; files in an explicit ``--fr-dir`` are all read.
"""

from __future__ import annotations

import os
import re
import stat
from functools import partial
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import msgspec

from diag.bundle.files import open_regular, read_capped
from diag.model import Bundle, ProcessInfo, RankCollectives
from diag.probes.nccl.fr_dump import DumpError, decode_dump, summarize_dump
from diag.probes.runner import ProbeCall, run_all

# The pure dump parser is re-exported: callers know it as part of this probe.
__all__ = [
    "DumpError",
    "FrTracker",
    "candidates",
    "collect",
    "decode_dump",
    "merge_records",
    "prefixes_of",
    "read_dump_file",
    "summarize_dump",
]

DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
PREFIX_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
MAX_DUMP_BYTES = 64 * 1024 * 1024
_RANK_SUFFIX = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d+)(?:\.json|\.pkl|\.pickle)?$")


def read_dump_file(path: Path) -> Tuple[Dict[str, Any], float]:
    """(dump, mtime) of one file; OSError or DumpError when unreadable. A regular file only
    (never a FIFO or a link to /dev/zero), refused past ``MAX_DUMP_BYTES`` before decoding."""
    with open_regular(path) as fh:
        st = os.fstat(fh.fileno())
        if st.st_size > MAX_DUMP_BYTES:
            raise DumpError(f"{path} is {st.st_size} bytes, over the {MAX_DUMP_BYTES} limit")
        data, truncated = read_capped(fh, MAX_DUMP_BYTES)
    if truncated:
        raise DumpError(f"{path} grew past the {MAX_DUMP_BYTES} byte limit while read")
    return decode_dump(data), st.st_mtime


def untrusted_reason(path: Path, info: Optional[ProcessInfo]) -> Optional[str]:
    """Why a dump file must not be read as the rank's (None: it may be).

    diag runs as root and the default prefix lies in world-writable /tmp: anyone there could
    plant ``/tmp/nccl_trace_rank_0`` to steer the verdict. A file is read only if its owner is
    the rank's user or root, and in a world-writable directory only if owned by the rank's
    user (or root when the rank runs as root)."""
    try:
        st = path.lstat()
        parent = path.parent.stat()
    except OSError as exc:
        return f"cannot stat: {exc.strerror or exc}"
    uid = info.uid if info is not None else None
    world_writable = bool(parent.st_mode & stat.S_IWOTH)
    if world_writable:
        if uid is None:
            return (
                f"in world-writable {path.parent} and the rank's user is unknown: "
                "not trusted (skipped)"
            )
        if st.st_uid != uid:
            return (
                f"owned by uid {st.st_uid}, not by the rank's uid {uid}, in world-writable "
                f"{path.parent}: not trusted (skipped)"
            )
        return None
    if uid is not None and st.st_uid not in (uid, 0):
        return f"owned by uid {st.st_uid}, neither the rank's uid {uid} nor root (skipped)"
    return None


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
        untrusted = untrusted_reason(path, info)
        if untrusted is not None:
            problems.append(f"{path}: {untrusted}")
            continue
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


class FrTracker:
    """The dumps as every command reads them: a capture once at its end
    (``collect.enrich.enrich_bundle``), a watch at each sample - torch writes them when the
    watchdog fires, possibly hours into a watch - re-reading only when a dump appears or
    changes (a stat per candidate). ``attach`` puts the current records on a bundle."""

    def __init__(self, fr_dirs: Sequence[str] = (), timeout_s: float = 10.0) -> None:
        self.fr_dirs = tuple(fr_dirs)
        self.timeout_s = timeout_s
        self._seen: Optional[Dict[str, Tuple[float, int]]] = None  # None: never read
        self._records: Tuple[RankCollectives, ...] = ()
        self.problems: Tuple[str, ...] = ()  # of the last read: one line per unreadable dump

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
            ProbeCall("flight-recorder", partial(self.refresh, bundle.processes), self.timeout_s)
        ]
        run_all(calls)  # a hung filesystem costs one timeout, the last records are kept
        return self.apply(bundle)

    def apply(self, bundle: Bundle) -> Bundle:
        """``bundle`` with the records of the last read merged into its collectives."""
        if not self._records:
            return bundle
        return msgspec.structs.replace(
            bundle, collectives=merge_records(bundle.collectives, self._records)
        )

    def refresh(self, processes: Sequence[ProcessInfo]) -> None:
        """Read the dumps if any appeared or changed since the last read (always the first
        time). Run it under a timeout: a dump on a hung mount blocks it."""
        if self._changed(processes):
            records, problems = collect(processes, self.fr_dirs)
            self._records, self.problems = records, problems
