"""NCCL RAS: ask a running NCCL job (NCCL >= 2.24) for its own view of every communicator.

When NCCL's RAS thread runs (the default since 2.24), ``ncclras`` connects to localhost:28028
and prints per communicator the ranks that answered (with per-op launched-collective counts
and async errors) and the ranks that did not (``missing_ranks``, with ``considered_dead``).
``-f json`` exists from NCCL 2.28.7; older clients reject the flag, and then the text report is
kept (redacted and truncated) for a person to read. Counts that stop changing between queries
mean stuck; see ``diag.verdict.collectives.ras_findings``.

No ``ncclras`` on PATH means nothing is recorded - most hosts lack it, that is not a failure.
The query runs under a hard timeout: RAS waits for unresponsive peers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any, Callable, List, Mapping, Optional

from diag.model import RasCommunicator, RasRank, RasSnapshot
from diag.probes.runner import ProbeCall, ProbeError

DEFAULT_TIMEOUT_S = 10.0
MAX_TEXT_CHARS = 8000


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and value >= 0 else None


def _rank(obj: Mapping[str, Any], missing: bool) -> RasRank:
    status = obj.get("status") or {}
    counts = obj.get("collective_counts") or {}
    return RasRank(
        rank=int(obj.get("rank", -1)),
        host=str(obj.get("host", "")),
        pid=_int(obj.get("pid")),
        cuda_dev=_int(obj.get("cuda_dev")),
        missing=missing,
        dead=bool(status.get("considered_dead", False)),
        async_error=int(status.get("async_error", 0) or 0),
        aborted=bool(status.get("abort_flag", False)),
        coll_counts={str(k): int(v) for k, v in counts.items() if isinstance(v, int) and v},
    )


def parse_json(text: str) -> RasSnapshot:
    """``ncclras -f json`` output → RasSnapshot (pure; ValueError on anything else)."""
    doc = json.loads(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("communicators"), list):
        raise ValueError("no 'communicators' list")
    comms: List[RasCommunicator] = []
    for comm in doc["communicators"]:
        ranks = [_rank(r, False) for r in comm.get("ranks") or []]
        ranks += [_rank(r, True) for r in comm.get("missing_ranks") or []]
        comms.append(
            RasCommunicator(
                comm_hash=str(comm.get("hash", "")),
                size=int(comm.get("size", 0) or 0),
                missing_ranks=int(comm.get("missing_ranks_count", 0) or 0),
                ranks=tuple(sorted(ranks, key=lambda r: r.rank)),
            )
        )
    return RasSnapshot(nccl_version=str(doc.get("nccl_version", "")), communicators=tuple(comms))


def _run(argv: List[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise ProbeError(f"ncclras did not answer within {timeout_s:g}s") from None


def query(
    executable: str, timeout_s: float = DEFAULT_TIMEOUT_S, scrub: Callable[[str], str] = str
) -> RasSnapshot:
    """One RAS query: JSON where the client supports it, else the text report."""
    # RAS's own wait for peers (-t) must end before our kill, so its partial answer arrives.
    ras_wait = str(max(1, int(timeout_s) - 2))
    result = _run([executable, "-f", "json", "-t", ras_wait], timeout_s)
    if result.returncode == 0:
        try:
            return parse_json(result.stdout)
        except (ValueError, TypeError, AttributeError) as exc:
            raise ProbeError(f"ncclras printed unreadable JSON: {exc}") from exc
    complaint = result.stderr.lower()
    if "option" not in complaint and "format" not in complaint:
        raise ProbeError(f"ncclras failed ({result.returncode}): {_first_line(result.stderr)}")
    result = _run([executable, "-t", ras_wait], timeout_s)  # NCCL < 2.28.7: text only
    if result.returncode != 0:
        raise ProbeError(f"ncclras failed ({result.returncode}): {_first_line(result.stderr)}")
    return RasSnapshot(text=scrub(result.stdout)[:MAX_TEXT_CHARS])


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:200]


class RasProbe:
    """The per-capture RAS probe; ``available()`` is False when ncclras is not on PATH."""

    def __init__(
        self,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        scrub: Callable[[str], str] = str,
        executable: Optional[str] = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.scrub = scrub
        self.executable = executable if executable is not None else shutil.which("ncclras")

    def available(self) -> bool:
        return self.executable is not None

    def read(self) -> RasSnapshot:
        if self.executable is None:
            raise ProbeError("ncclras is not installed")
        return query(self.executable, self.timeout_s, self.scrub)

    def call(self) -> ProbeCall[RasSnapshot]:
        return ProbeCall("ncclras", self.read, timeout_s=self.timeout_s + 2.0)
