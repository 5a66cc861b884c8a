"""idle: a job that cannot reach its parameter server (the port refuses) and retries every
5 s - it sleeps between attempts, waiting on something outside the job."""

from __future__ import annotations

import socket
import time


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()  # nothing listens there now: connect() is refused at once
    return port


def connect_with_retry(port: int) -> socket.socket:
    attempt = 0
    while True:
        attempt += 1
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=2.0)
        except OSError as exc:
            print(f"attempt {attempt}: {exc}; retrying in 5 s", flush=True)
            if attempt == 1:
                print("READY", flush=True)
            time.sleep(5.0)


if __name__ == "__main__":
    connect_with_retry(closed_port())
