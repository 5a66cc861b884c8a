"""What a line that says a process of the job died looks like.

Shared by the log probe (which keeps such lines from the bytes written between two samples,
so one that scrolls past before a tail is read is not lost) and the verdict (which names the
dead rank from them). "Worker proc VllmWorker-1 died unexpectedly", torchrun's
"failed (exitcode: -9) local_rank: 1", a segfault's "core dumped", vLLM's EngineDeadError,
SGLang's "Subprocess scheduler_1 (pid=4242) crashed with exit code -9".
"""

from __future__ import annotations

import re

PROCESS_DEATH_PATTERN = (
    r"died unexpectedly|(?:worker|process|engine|rank|child)\w*\s[^.\n]{0,40}?"
    r"(?:died|is dead|exited unexpectedly|was killed|terminated unexpectedly|crashed)|"
    r"EngineDeadError|Segmentation fault|core dumped|exitcode\s*:\s*-\d+"
)
PROCESS_DEATH = re.compile(PROCESS_DEATH_PATTERN, re.IGNORECASE)
# The same on raw log bytes, for the probe to search what it reads without decoding it all.
PROCESS_DEATH_BYTES = re.compile(PROCESS_DEATH_PATTERN.encode(), re.IGNORECASE)
# Every match holds one of these (lower-cased): the probe looks for them first - a plain
# substring search is ~20x faster than the pattern over megabytes of ordinary log lines.
DEATH_KEYWORDS = (
    b"died",
    b"dead",
    b"exited",
    b"killed",
    b"terminated",
    b"segmentation fault",
    b"core dumped",
    b"exitcode",
    b"crashed",
)


def is_death_line(line: str) -> bool:
    """A line reporting that a process (a worker, the engine, a rank) died."""
    return bool(PROCESS_DEATH.search(line))
