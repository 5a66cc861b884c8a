"""One Flight Recorder dump (JSON or pickle bytes) -> per-group ``RankCollectives`` (pure).

The dump format: ``entries`` (with ``collective_seq_id``, ``profiling_name`` such as
``nccl:all_reduce``, ``state``, ``process_group`` = [name, desc], ``time_created_ns``),
``pg_status`` (last enqueued / started / completed per group; ints in pickle, strings in JSON)
and ``pg_config`` (the ranks of a group). Pickles are read with an unpickler that refuses every
class: torch writes only dicts, lists, tuples, strings and numbers, and a dump file on a shared
/tmp must not be able to run code. No file access here, so the format knowledge is tested on
recorded dumps; finding and reading the files is ``diag.probes.nccl.flight_recorder``.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

import msgspec

from diag.model import CollectiveRecord, RankCollectives

RECENT_ENTRIES = 6


class DumpError(Exception):
    """A file that is not a readable Flight Recorder dump."""


class _NoClassUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a dump")


# A real dump nests ~5 deep (dict -> entries list -> entry dict -> sizes list -> list) and holds
# about 20 values per ring entry; a hostile file may nest a million lists, refer to one list
# from itself (a cycle) or share a list 2**100 times through the memo (tiny on disk, endless to
# walk). Walked iteratively once after the load, it is refused past either bound.
MAX_DEPTH = 32
MAX_VALUES = 4_000_000
_json_decoder = msgspec.json.Decoder()


def check_shape(obj: Any, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> None:
    """Raise DumpError if ``obj`` nests deeper than ``max_depth`` (a cycle does) or holds more
    than ``max_values`` values counting every shared reference (iterative: no recursion)."""
    stack: List[Tuple[Any, int]] = [(obj, 1)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > max_values:
            raise DumpError(f"not a Flight Recorder dump: more than {max_values} values")
        if isinstance(value, dict):
            children: Any = [*value.keys(), *value.values()]
        elif isinstance(value, (list, tuple, set, frozenset)):
            children = value
        else:
            continue
        if depth >= max_depth:
            raise DumpError(f"not a Flight Recorder dump: nested deeper than {max_depth}")
        stack.extend((child, depth + 1) for child in children)


def decode_dump(data: bytes) -> Dict[str, Any]:
    """Bytes of a dump (JSON or pickle) → the dump dict (pure; raises DumpError).

    The caller bounds the size (``flight_recorder.MAX_DUMP_BYTES``); loading is then O(size)
    and ``check_shape`` bounds what reading the result may cost."""
    head = data.lstrip()[:1]
    try:
        if head == b"{":
            obj = _json_decoder.decode(data)
        else:
            obj = _NoClassUnpickler(io.BytesIO(data)).load()
    except RecursionError:
        raise DumpError(f"not a Flight Recorder dump: nested deeper than {MAX_DEPTH}") from None
    except (
        ValueError,
        pickle.UnpicklingError,
        EOFError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        MemoryError,
        OverflowError,
        msgspec.DecodeError,
    ) as exc:
        raise DumpError(f"not a Flight Recorder dump: {str(exc)[:200]}") from None
    check_shape(obj)
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
        duration_ms=_duration_ms(entry.get("duration_ms")),
    )


def _duration_ms(value: Any) -> Optional[float]:
    """NCCL's measured duration (timing on); None when absent, negative or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 <= value < 1e9 else None


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
