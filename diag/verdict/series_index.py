"""One process's samples, found by key instead of by a scan of every sample's processes.

Finders that ask about one process at a time (a spin on a dead thread's flag, a futile poll,
a log's writers) each used to walk every process of every sample to find theirs: asked for
every rank of a merged 16,384-rank bundle that is ranks x ranks x samples (issue 35: 20 s of a
52 s verdict). The index is built once per bundle (memoised on its samples, as
``thread_wait.peer_tids`` is) and answers in the order the samples were taken.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from diag.model import Bundle, LogSample, ProcessSample, Sample
from diag.verdict.bundle_index import derived

Key = Tuple[str, int]  # (host, pid)

_EMPTY: Tuple[ProcessSample, ...] = ()


def _index(bundle: Bundle) -> Dict[Key, List[Tuple[int, ProcessSample]]]:
    """(sample position, the first record of the process in that sample), per process."""
    return derived("series_index.processes", bundle.samples, _by_key, bundle.samples)


def _by_key(samples: Sequence[Sample]) -> Dict[Key, List[Tuple[int, ProcessSample]]]:
    out: Dict[Key, List[Tuple[int, ProcessSample]]] = {}
    for i, sample in enumerate(samples):
        for ps in sample.processes:
            seen = out.setdefault((ps.host, ps.pid), [])
            if not seen or seen[-1][0] != i:  # the first record of a sample wins
                seen.append((i, ps))
    return out


def process_samples(bundle: Bundle, host: str, pid: int) -> List[ProcessSample]:
    """The process's record in each sample where it appears, oldest first."""
    return [ps for _, ps in _index(bundle).get((host, pid), ())]


def process_at(bundle: Bundle, host: str, pid: int, position: int) -> Sequence[ProcessSample]:
    """The process's record in the sample at ``position`` (of ``bundle.samples``), if any."""
    for i, ps in _index(bundle).get((host, pid), ()):
        if i == position:
            return (ps,)
    return _EMPTY


def host_logs(bundle: Bundle, host: str) -> List[Tuple[int, LogSample]]:
    """(sample position, log) for the logs read on ``host``, oldest sample first."""
    return derived("series_index.logs", bundle.samples, _logs_by_host, bundle.samples).get(host, [])


def _logs_by_host(samples: Sequence[Sample]) -> Dict[str, List[Tuple[int, LogSample]]]:
    out: Dict[str, List[Tuple[int, LogSample]]] = {}
    for i, sample in enumerate(samples):
        for log in sample.logs:
            out.setdefault(log.host, []).append((i, log))
    return out
