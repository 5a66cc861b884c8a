"""slow: a server still starting, caught between two compile steps - the API server listens
(its health endpoint answers 503) and waits for its engine, the engine's log ends in a compile
bar at 45% and it waits for its compile worker: every thread in a wait, a port open, no ready
line, nothing served. Not "idle: healthy, waiting for work" - it is still starting."""

from __future__ import annotations

from _startup_server import run

if __name__ == "__main__":
    run(ready=False)
