"""idle: real gunicorn, 2 sync workers, no traffic - the arbiter wakes once a second in
select, each worker waits in select on the listening socket; nothing is connected."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from _gunicorn import serve


def app(environ: Any, start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = b'{"text": "ok"}'
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "14")])
    return [body]


if __name__ == "__main__":
    serve(app)
