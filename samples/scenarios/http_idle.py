"""idle: a ready HTTP server (event loop in select, port listening) whose worker processes are
blocked reading an empty request queue - looks exactly like a deadlock by CPU and stacks."""

from __future__ import annotations

import http.server
import multiprocessing as mp
import socketserver


def worker_loop(requests: mp.Queue[object]) -> None:
    while True:
        job = requests.get()
        if job is None:
            return


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok\n")


def main() -> None:
    ctx = mp.get_context("spawn")
    requests: mp.Queue[object] = ctx.Queue()
    workers = [ctx.Process(target=worker_loop, args=(requests,)) for _ in range(3)]
    for w in workers:
        w.start()
    with socketserver.TCPServer(("127.0.0.1", 0), Handler) as server:
        print(f"listening on {server.server_address[1]}", flush=True)
        import time

        time.sleep(1.0)  # let the spawned workers reach requests.get()
        print("READY", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
