"""idle: the contrast of ``threaded_server_short_requests`` - the same thread-per-request
feature service, no client: nothing comes, nothing moves."""

from __future__ import annotations

from threaded_server_short_requests import run

if __name__ == "__main__":
    run(clients=0)
