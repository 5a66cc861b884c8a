"""slow, not deadlocked: a job fetching its config from a service outside it (a local HTTP
server it does not own: started beside it, not its child) that answers 503 for its first
minute and 200 after. The job retries every second and logs each failure ("attempt 7
failed: HTTP Error 503: Service Unavailable; retrying in 1.0 s"): its only moving output is
failure, but nothing of it is blocked - it goes on by itself once the service answers."""

from __future__ import annotations

import http.server
import os
import tempfile
import time
import urllib.error
import urllib.request

# The service answers 503 this long after it starts (a test shortens it to see it answer).
UNAVAILABLE_S = float(os.environ.get("DIAG_SERVICE_UNAVAILABLE_S", "60"))


def serve_outside(port_w: int) -> None:
    """Double fork: the service is reparented away from the job (same process group, so the
    scenario runner's kill reaches it), answering 503 for its first ``UNAVAILABLE_S``."""
    child = os.fork()
    if child > 0:
        os.waitpid(child, 0)  # reaped at once: the service's parent is gone, no zombie left
        return
    if os.fork() > 0:
        os._exit(0)
    started = time.monotonic()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ready = time.monotonic() - started > UNAVAILABLE_S
            body = b'{"lr": 0.001}' if ready else b"warming up"
            self.send_response(200 if ready else 503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    os.write(port_w, f"{server.server_address[1]}\n".encode())
    os.close(port_w)
    server.serve_forever()


def main() -> None:
    r, w = os.pipe()
    serve_outside(w)
    os.close(w)
    port = int(os.read(r, 32).decode())
    os.close(r)
    where = tempfile.mkdtemp(prefix="diag-retry-")
    log = open(os.path.join(where, "job.log"), "a", buffering=1)  # noqa: SIM115
    attempt = 0
    while True:
        attempt += 1
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=2.0) as resp:
                print(f"attempt {attempt}: config loaded ({resp.read()!r}); training", file=log)
                break
        except urllib.error.URLError as exc:
            print(f"attempt {attempt} failed: {exc}; retrying in 1.0 s", file=log)
            if attempt == 3:
                print("READY", flush=True)
            time.sleep(1.0)
    while True:
        time.sleep(1.0)
        print("step", attempt, file=log)
        attempt += 1


if __name__ == "__main__":
    main()
