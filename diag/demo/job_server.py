"""``diag demo server`` (expected: idle): a ready inference server with no traffic.

One process: an ``http.server`` listening on an ephemeral 127.0.0.1 port, its main thread in
``serve_forever`` (select). Nothing moves, but that is the healthy state of a server waiting
for requests: diag calls it idle, not deadlocked, because the wait is an event loop on a
listening socket.
"""

from __future__ import annotations

import http.server
import threading

from diag.demo import _ranks


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # the name http.server calls
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, format: str, *args: object) -> None:
        """Silent: the demo's log stays empty."""


def main() -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    print(f"serving on http://127.0.0.1:{server.server_address[1]}/", flush=True)
    threading.Timer(1.0, _ranks.signal_ready).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
