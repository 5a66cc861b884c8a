"""idle: real torchrun, a tensor-parallel inference server with no traffic. Rank 0 runs the
HTTP front end (a thread listening on a fixed port) and its main loop waits for a request on
a queue; ranks 1 and 2 wait in ``broadcast_object_list`` for rank 0 to hand them the next
batch. Every rank "waits", one rank differs - and nothing is wrong."""

from __future__ import annotations

import http.server
import queue
import socketserver
import threading

import _ports
import _torchrun

requests: queue.Queue[bytes] = queue.Queue()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        requests.put(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.send_response(202)
        self.end_headers()


def serve() -> None:
    import torch.distributed as dist

    _torchrun.init()
    if _torchrun.rank() == 0:
        server = socketserver.ThreadingTCPServer(("127.0.0.1", _ports.service_port()), Handler)
        threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    _torchrun.mark("serving" if _torchrun.rank() == 0 else "broadcast")
    while True:
        batch = [requests.get()] if _torchrun.rank() == 0 else [None]
        dist.broadcast_object_list(batch, src=0)


if __name__ == "__main__":
    if _torchrun.is_rank():
        serve()
    else:
        _torchrun.launch(__file__, 3)
