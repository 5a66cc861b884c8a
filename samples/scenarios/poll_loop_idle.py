"""idle: a two-rank server with no traffic whose schedulers busy-poll - rank 0 drains its
ZeroMQ socket with NOBLOCK (``zmq.Again`` every time), both ranks broadcast the empty batch
through gloo every iteration and run an ``on_idle`` hook: two cores at ~100% and bytes moving
between the ranks over loopback, while nobody is served. Motion, not work: idle, waiting for
requests - not "slow: CPU-bound", not "progressing: ranks keep writing output"."""

from __future__ import annotations

import time

from _poll_server import start

if __name__ == "__main__":
    server, port, _front = start(n_ranks=2, batch_ms=20.0)
    print(f"listening on {port}", flush=True)
    time.sleep(1.0)  # every rank back in its poll loop after the warm-up request
    print("READY", flush=True)
    server.serve_forever()
