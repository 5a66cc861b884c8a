"""progressing: the contrast of ``child_pipe_polled`` - the same driver reads its exporter's
manifest line by line as it comes, so the exporter never blocks on the pipe."""

from __future__ import annotations

from child_pipe_polled import run

if __name__ == "__main__":
    run(drain=True)
