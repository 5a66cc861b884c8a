"""A rank asleep in a timed back-off while its peers wait for it in a collective: it resumes by
itself, so the job is slow, not diverged (issue #33, issue #34's first miss).

Why: on a stack, a rank in ``time.sleep`` inside a retry loop looks exactly like a rank that
took another code path and never comes back, and "kill the job" loses a job that would have
moved on in 47 s. The kernel tells them apart: the sleep's own timeout
(``ThreadSample.timeout_s`` / ``wakes_in_s``, ``diag.probes.wait_deadline``) says when it ends.
It is a back-off only while time says so:

- its budget is shorter than any sane back-off (``SANE_BACKOFF_S``): ``while True:
  time.sleep(3600)`` is a rank that parked itself, not one that will resume;
- it does not sleep through budget after budget of the same length in the capture (a retry
  loop whose delays grow is a back-off; one that wakes every second to sleep again is a poll);
- its log does not say the same retry again and again (``REPEATS``): a back-off whose
  condition can never hold - a server that answers 503 for good - is stuck, not slow.

A retry line in the rank's log (the generic words here, the frameworks' own spellings in their
packs' ``retry_lines``) confirms it and is quoted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from diag.frameworks import union
from diag.model import Bundle, ThreadSample, main_thread
from diag.verdict.features import ProcSignals
from diag.verdict.series_index import process_at
from diag.verdict.wait_age import age_words
from diag.verdict.wording import group_by_wait, verb, waits_phrase, where, who

# A budget this long is no back-off: a rank that sleeps 10 min or more has parked itself.
SANE_BACKOFF_S = 600.0
# The same retry line this many times in the rank's log: a retry that never succeeds.
REPEATS = 4
# Woke and slept again this many times in the capture with no longer budget: a poll loop.
REWAKES = 2
# The generic words of a retry or back-off line, in any program's log.
RETRY_WORDS = re.compile(
    r"\bretr(?:y|ying|ies|ied)\b|\bback(?:ing)?[ -]?off\b|\btry(?:ing)? again\b|\bRetry-After\b",
    re.IGNORECASE,
)
_SLEEP_CALLS = frozenset({"clock_nanosleep", "nanosleep"})
# Parts of a retry line that change from one retry to the next without saying anything:
# the timestamp, an attempt counter ("attempt 3/8", "[Retry 2/5]", "#4").
_CHANGING = re.compile(
    r"^\S*\d{4}-\d\d-\d\d[T ]?\S*\s*|\d\d:\d\d:\d\d(?:[.,]\d+)?|\b\d+/\d+\b|#\d+|"
    r"\b(?:attempt|retry|try)\s*\d+",
    re.IGNORECASE,
)
_LINE_CHARS = 160


@dataclass(frozen=True)
class Backoff:
    """One rank asleep in a timed wait that ends by itself."""

    proc: ProcSignals
    wakes_in_s: float
    timeout_s: Optional[float]
    call: str  # "time.sleep", "a timed wait"
    line: str  # the last retry line of its log ("" when none)


def is_retry_line(line: str) -> bool:
    return bool(RETRY_WORDS.search(line) or union.RETRY_LINE.search(line))


def _main_threads(bundle: Bundle, p: ProcSignals) -> List[Tuple[float, ThreadSample]]:
    """Its main thread at each sample where it was seen alive, with the sample's time."""
    out: List[Tuple[float, ThreadSample]] = []
    for index in p.samples:
        if index >= len(bundle.samples):
            continue
        sample = bundle.samples[index]
        for ps in process_at(bundle, p.key[0], p.pid, index):
            if ps.status == "alive":
                main = main_thread(ps)
                if main is not None:
                    out.append((ps.t_s or sample.t_s, main))
    return out


def _rewakes(threads: Sequence[Tuple[float, ThreadSample]]) -> Tuple[int, bool]:
    """Times its sleep ended between two samples (the next came after it was due) and it was
    asleep again, with a budget no longer than before: a poll, not a back-off that grows; and
    whether one such budget was shorter than half the gap between the samples - a sleep that
    short cannot be why the rank is missing from a collective for the whole capture (a
    ``while not flag.exists(): time.sleep(0.5)`` poll caught asleep at two samples only, when
    a read failed at the third, is no back-off)."""
    count, short = 0, False
    for (t0, before), (t1, after) in zip(threads, threads[1:]):
        if before.wakes_in_s is None or after.wakes_in_s is None:
            continue
        grew = (after.timeout_s or 0.0) > (before.timeout_s or 0.0) * 1.2
        if t1 - t0 > before.wakes_in_s + 0.05 and not grew:
            count += 1
            budget = before.timeout_s if before.timeout_s is not None else before.wakes_in_s
            short = short or budget < (t1 - t0) / 2
    return count, short


def retry_lines(bundle: Bundle, p: ProcSignals) -> List[str]:
    """The retry lines of the logs ``p`` writes, in order, at the last sample that read them."""
    if not bundle.samples:
        return []
    logs = bundle.samples[-1].logs or ()
    out: List[str] = []
    for log in logs:
        if p.pid in log.pids and log.host == p.key[0]:
            out.extend(line for line in log.tail if is_retry_line(line))
    return out


def repeats(lines: Sequence[str]) -> int:
    """How many times the most frequent retry line was written (counters and times aside)."""
    counts: Dict[str, int] = {}
    for line in lines:
        key = _CHANGING.sub("", line).strip()
        counts[key] = counts.get(key, 0) + 1
    return max(counts.values(), default=0)


def backing_off(bundle: Bundle, p: ProcSignals) -> Optional[Backoff]:
    """``p`` sleeps in a timed wait that ends by itself within a sane back-off, and neither the
    capture nor its log shows it retrying the same thing for ever."""
    threads = _main_threads(bundle, p)
    if not threads:
        return None
    last = threads[-1][1]
    if last.wakes_in_s is None or last.state not in ("S", "D"):
        return None
    if last.timeout_s is not None and last.timeout_s >= SANE_BACKOFF_S:
        return None
    rewakes, short = _rewakes(threads)
    if last.wakes_in_s >= SANE_BACKOFF_S or rewakes >= REWAKES or short:
        return None
    lines = retry_lines(bundle, p)
    if repeats(lines) >= REPEATS:
        return None
    call = "time.sleep" if last.syscall in _SLEEP_CALLS else "a timed wait"
    line = lines[-1][-_LINE_CHARS:] if lines else ""
    return Backoff(p, last.wakes_in_s, last.timeout_s, call, line)


def backoffs(bundle: Bundle, culprits: Sequence[ProcSignals]) -> Tuple[Backoff, ...]:
    """Every culprit backing off, or () when any one of them is not: one diverged rank is
    enough to hang the group whatever the others do."""
    found = [backing_off(bundle, p) for p in culprits]
    if not found or any(b is None for b in found):
        return ()
    return tuple(b for b in found if b is not None)


def backoff_sentence(backs: Sequence[Backoff], waiters: Sequence[ProcSignals]) -> str:
    """ "slow: rank 1 sleeps in `backoff` (time.sleep) and wakes by itself in ~47 s; ranks 0, 2
    wait for it in `all_reduce` - wait", with its log's retry line when it has one."""
    procs = [b.proc for b in backs]
    first = backs[0]
    soonest = min(b.wakes_in_s for b in backs)
    asleep = verb(procs, "sleeps", "sleep")
    wakes = verb(procs, "wakes", "wake")
    text = (
        f"{who(procs)} {asleep} in {where(first.proc)} ({first.call}) and {wakes} by "
        f"itself in ~{age_words(max(1.0, soonest))}; "
        f"{waits_phrase(group_by_wait(waiters)[:2])} for it - a back-off, not a diverged rank: "
        "wait for it"
    )
    if first.line:
        text += f' (its log: "{first.line}")'
    return text


def pool_task_backoffs(bundle: Bundle, procs: Sequence[ProcSignals]) -> Tuple[Backoff, ...]:
    """The pool workers among ``procs`` that run a task (a frame of their pool's worker loop
    on the stack, the packs' ``pool_worker_files``, and no wait for the next task), when every
    one of them backs off (``backing_off``); () when none runs a task or one does not."""
    busy = [p for p in procs if p.main_wait is not None and p.main_wait.kind != "queue"]
    in_task = [p for p in busy if _in_pool_task(bundle, p)]
    return backoffs(bundle, in_task) if in_task and len(in_task) == len(busy) else ()


def _in_pool_task(bundle: Bundle, p: ProcSignals) -> bool:
    stack = bundle.stacks.get(p.main_stack_ids[-1] or "") if p.main_stack_ids else None
    return stack is not None and any(
        marker in f.filename for f in stack.frames for marker in union.POOL_WORKER_FILES
    )
