"""A WSGI app served by real gunicorn (the arbiter in this process, 2 forked sync workers),
the way `gunicorn -w 2 app:app` runs one; access log off (gunicorn's default)."""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import tempfile
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

from _http_clients import start_detached
from gunicorn.app.base import BaseApplication

# Shared across the fork (anonymous shared memory): what the workers have done so far.
booted = mp.RawValue("i", 0)


class _App(BaseApplication):  # type: ignore[misc]
    def __init__(self, app: Any, options: Dict[str, Any]) -> None:
        self.application = app
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self.application


def _post_worker_init(_worker: Any) -> None:
    booted.value += 1


def serve(
    app: Any,
    ready: Callable[[], bool] = lambda: True,
    clients: Optional[Tuple[str, int]] = None,
) -> None:
    """Serve ``app`` with 2 sync workers; ``clients``: (path, n) outside clients looping on
    GET path. Prints READY once both workers booted and ``ready()`` holds."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.set_inheritable(True)
    port = sock.getsockname()[1]
    print(f"listening on {port}", flush=True)
    if clients is not None:
        start_detached(port, *clients)  # they queue in the backlog until a worker accepts

    def announce() -> None:  # a short-lived thread of the arbiter; it ends at READY
        while not (booted.value >= 2 and ready()):
            time.sleep(0.05)
        time.sleep(0.3)  # let the workers settle into the state under test
        print("READY", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    options = {
        "bind": [f"fd://{sock.fileno()}"],
        "workers": 2,
        "worker_class": "sync",
        "timeout": 120,  # a long request budget, as ML endpoints set it
        "loglevel": "warning",
        "accesslog": None,
        "post_worker_init": _post_worker_init,
        # gunicorn 23+'s control server (a thread of the arbiter) stays on, on a socket of
        # this run's own: the default, ~/.gunicorn/gunicorn.ctl, is shared by parallel runs.
        "control_socket": os.path.join(tempfile.mkdtemp(prefix="gunicorn-"), "gunicorn.ctl"),
    }
    _App(app, options).run()
