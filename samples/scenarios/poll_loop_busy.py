"""progressing: the poll-loop server of ``poll_loop_idle`` (two ranks, ZeroMQ NOBLOCK polls,
gloo broadcasts, ``on_idle``) under load - 3 outside clients keep requests in flight, each a
batch both ranks compute for 20 ms. The same loop, the same broadcasts: now a batch computes
and answers go out, so it must still read progressing (the contrast to the idle case)."""

from __future__ import annotations

import threading
import time

from _http_clients import start_detached
from _poll_server import start

if __name__ == "__main__":
    server, port, front = start(n_ranks=2, batch_ms=20.0)
    print(f"listening on {port}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    start_detached(port, "/generate", 3)
    while front.served < 30:
        time.sleep(0.1)
    print("READY", flush=True)
    while True:
        time.sleep(3600)
