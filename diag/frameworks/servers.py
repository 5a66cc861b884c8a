"""Python web and RPC servers: uvicorn / FastAPI / Starlette, gunicorn, aiohttp, tornado,
Flask / werkzeug, http clients (requests, httpx) and green-thread loops: the plumbing a
request passes through, and the lines they print once they listen.

Facts from uvicorn 0.30 ("Application startup complete.", "Uvicorn running on
http://..."), werkzeug 3 ("Running on http://..."), aiohttp 3.9 ("Running on ...").
"""

from __future__ import annotations

from diag.frameworks.base import FrameSign, Pack

PACK = Pack(
    name="Python servers (uvicorn, gunicorn, asyncio servers)",
    key="servers",
    argv=("uvicorn", "gunicorn"),
    modules=("uvicorn/", "gunicorn/", "aiohttp/", "starlette/"),
    ready_lines=(
        r"\b(?:is|are|now) ready\b",
        r"startup complete",
        r"running on (?:https?://|[\d.]+:)",
        r"listening on\b",
        r"serving on\b",
        r"server started\b",
    ),
    plumbing_packages=frozenset(
        {
            "uvicorn",
            "uvloop",
            "anyio",
            "starlette",
            "fastapi",
            "gunicorn",
            "h11",
            "h2",
            "httptools",
            "websockets",
            "aiohttp",
            "tornado",
            "grpc",
            "requests",
            "urllib3",
            "httpx",
            "httpcore",
            "werkzeug",
            "flask",
            "gevent",
            "eventlet",
            "greenlet",
            "sniffio",
        }
    ),
    # gunicorn's workers: every worker class runs under ``Worker.init_process`` (forked by the
    # arbiter, one argv for all): a prefork server's pool, never ranks.
    server_frames=(
        FrameSign(frozenset({"init_process"}), ("gunicorn/workers/base.py",)),
        FrameSign(frozenset({"run_for_one", "run_for_multiple"}), ("gunicorn/workers/sync.py",)),
    ),
    # uvloop's loop is C: under it only its ``run`` (asyncio.run's replacement) shows.
    coroutine_loop_frames=(FrameSign(frozenset({"run"}), ("uvloop/__init__.py",)),),
    # uvicorn's and gunicorn's own words when a request or a worker fails (access lines with
    # their status are read generically): an application that raised, a response never
    # finished, a worker killed by the arbiter's timeout (uvicorn 0.30 protocols/http/*.py,
    # gunicorn 22 arbiter.py).
    failure_lines=(
        r"Exception in ASGI application",
        r"ASGI callable returned without (?:starting|completing) response",
        r"WORKER TIMEOUT \(pid:\d+\)",
        r"Worker \(pid:\d+\) was sent (?:SIGKILL|SIGTERM)",
        r"Error handling request\b",
    ),
    sources=("uvicorn 0.30 uvicorn/server.py, werkzeug 3 serving.py",),
)
