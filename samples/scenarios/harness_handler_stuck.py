"""deadlocked: the job's own harness waits on its own server, whose handler blocks on a lock
the warm-up never released - a request in flight from inside the job, unanswered for as long
as diag looks. The server still listens and its loop sits in select: without counting the
in-job client's request as a wait, it reads "idle: healthy, waiting for work"."""

from __future__ import annotations

from _harness import run

if __name__ == "__main__":
    run(handler_hangs=True)
