"""A server outside the job's process tree, as a remote service or a broker is: bound here (so
its port is known before the job connects), then served by a grandchild of a double fork that
this process does not wait for - diag sees no parent-child link between the job and it."""

from __future__ import annotations

import os
import socket
from typing import Callable


def serve_outside(serve: Callable[[socket.socket], None], new_session: bool = False) -> int:
    """``serve(listener)`` in a process outside this one's tree; the port it listens on.
    ``new_session``: in a session of its own too (a service another login started)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = int(listener.getsockname()[1])
    if os.fork() == 0:
        if new_session:
            os.setsid()
        if os.fork() == 0:
            serve(listener)
        os._exit(0)
    os.wait()
    listener.close()
    return port
