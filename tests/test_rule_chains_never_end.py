"""Rule ``chains_never_end``'s sentence: a cycle of a known pitfall names its fix beside
"kill it" - a child's queue feeder thread blocked on a pipe while its parent joins it
(``mp_queue_join_before_get``: call ``q.get()`` before ``p.join()``); another cycle gets no
pitfall line.
"""

from __future__ import annotations

from diag.verdict.rules import words

JOIN_BEFORE_GET = (
    "pid 10 python, pid 11 python: a cycle - they wait on each other (child, pipe), nothing "
    "else ends it: pid 10 python waits for its children in `BaseProcess.join` ← `<module>`; "
    "pid 11 python its thread QueueFeederThread writes fd 4 (pipe:[1]); pid 10 python holds "
    "its read end (fd 3) - kill it, nothing will end these waits"
)


def test_join_before_get_names_the_fix() -> None:
    text = words.chains_never_end([JOIN_BEFORE_GET])
    assert text.endswith("call `q.get()` before `p.join()`")


def test_another_cycle_gets_no_pitfall_line() -> None:
    other = JOIN_BEFORE_GET.replace("QueueFeederThread", "writer")
    assert "pitfall" not in words.chains_never_end([other])
