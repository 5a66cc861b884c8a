"""idle: the contrast to ``startup_parked`` - the same server after its start-up: the compile
bar reached 100%, the engine logged that it is ready to serve and waits for work, the API
server listens. Nothing moves, and it is ready: idle, healthy, waiting for work."""

from __future__ import annotations

from _startup_server import run

if __name__ == "__main__":
    run(ready=True)
