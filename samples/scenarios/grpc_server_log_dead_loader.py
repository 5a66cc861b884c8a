"""deadlocked: grpc_handler_dead_loader with the server writing a log of its own
(``server.log``, as a service started beside the job would): its handler waits on
``loaded.wait()`` for the ``model-loader`` thread that died at start-up ("Exception in thread
model-loader" in that log); the client's Predict (no deadline) waits for ever."""

from __future__ import annotations

import sys

from grpc_handler_dead_loader import main, serve

if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2])
    else:
        main(server_log=True)
