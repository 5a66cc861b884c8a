"""The port a scenario's server listens on."""

from __future__ import annotations

import random
import socket


def service_port() -> int:
    """A free port below the ephemeral range, as a service's configured port would be (8000,
    30000...; port 0 hands out an ephemeral one, which reads as a communication library's
    listener)."""
    for port in random.sample(range(20000, 30000), 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-29999")
