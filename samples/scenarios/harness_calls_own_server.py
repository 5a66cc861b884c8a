"""progressing: a job that benchmarks its own server - the root starts an HTTP server and a
harness, both its children, and the harness sends request after request (each answer a 20 ms
backend wait, 2 KiB). No log, little CPU, no client outside the job: the requests answered
are the work, whoever sent them - not "idle: healthy, waiting for work"."""

from __future__ import annotations

from _harness import run

if __name__ == "__main__":
    run(handler_hangs=False)
