"""Equal thread records kept once: hash-consing for bundles folded one host at a time.

Why: a merged bundle of 16,384 ranks x 300 threads x 3 samples is 15 million thread records,
4.5 GB when each host's copy is kept (issue 35). Ranks that sit in the same place record
the same threads - the same tids where every node runs the same containers, the same stacks,
the same kernel state and, for idle threads, the same tick counts - and a thread that did not
run between two samples records the same values twice. Records are frozen msgspec structs,
hashable and compared in C, so a table from a record to its first copy makes every later
equal record a reference to that copy: the memory of a merge grows with the distinct
records, not with the ranks.

Equal means ``==`` (the test ``proc_classes`` uses for its classes): a record that holds
something unhashable is kept as it is, never shared.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import msgspec

from diag.model import Bundle, ProcessSample, Sample, ThreadSample

Threads = Tuple[ThreadSample, ...]


class Interner:
    """The first copy of every thread record and threads tuple folded so far."""

    def __init__(self) -> None:
        self._tuples: Dict[Threads, Threads] = {}
        self._threads: Dict[ThreadSample, ThreadSample] = {}
        # The tuple the same pid had at the same sample index on the host before: ranks of a
        # job mostly repeat it, and one compare is half of a hash and a compare.
        self._last: Dict[Tuple[int, int], Threads] = {}
        # Distinct thread records held (what a merge's memory grows with): the budget's count.
        self.thread_records = 0

    def threads(self, threads: Threads, near: Optional[Tuple[int, int]] = None) -> Threads:
        """The shared tuple equal to ``threads``: a tuple seen before is returned as first
        seen; a new one is rebuilt from shared records (one hash and one compare a thread).
        ``near``: where it was seen (sample index, pid) - the tuple last found there is
        compared first, and a tuple equal to it costs one compare a thread, no hash."""
        if not threads:
            return threads
        if near is not None:
            last = self._last.get(near)
            if last is not None and last == threads:
                return last
            shared = self.threads(threads)
            self._last[near] = shared
            return shared
        try:
            seen = self._tuples.get(threads)
        except TypeError:  # an unhashable value inside: kept as it is
            return threads
        if seen is not None:
            return seen
        shared = tuple(self._thread(t) for t in threads)
        self._tuples[shared] = shared
        return shared

    def _thread(self, thread: ThreadSample) -> ThreadSample:
        found = self._threads.setdefault(thread, thread)
        if found is thread:
            self.thread_records += 1
        return found

    def process(self, ps: ProcessSample, index: int = -1) -> ProcessSample:
        threads = self.threads(ps.threads, (index, ps.pid))
        return ps if threads is ps.threads else msgspec.structs.replace(ps, threads=threads)

    def sample(self, sample: Sample) -> Sample:
        procs = tuple(self.process(ps, sample.index) for ps in sample.processes)
        return msgspec.structs.replace(sample, processes=procs)

    def bundle(self, bundle: Bundle) -> Bundle:
        """``bundle`` with every process record's threads shared; equal to it field by field."""
        samples = tuple(self.sample(s) for s in bundle.samples)
        return msgspec.structs.replace(bundle, samples=samples)
