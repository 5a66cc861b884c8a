"""deadlocked: grpc_handler_dead_loader with the client in a file of its own: it starts the model
server (``grpc_handler_dead_loader.py serve``) as a child writing the job's log, and calls
``Predict`` with no deadline. The server's ``model-loader`` thread died at start-up
("Exception in thread model-loader" in the log both write); its handler waits on
``loaded.wait()`` for ever. CPython's death line names no process, but its traceback names
``grpc_handler_dead_loader.py``, which only the server's stacks run: the death is the
server's (``death_owner``). Where client and server run one script, the death is nobody's
(grpc_handler_dead_loader, VERDICT_WRONG_TODAY)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time

import grpc

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grpc_handler_dead_loader.py")


# The client's lines below repeat grpc_handler_dead_loader.main's on purpose: importing them
# from that file would put it on the client's stack, and the point of this scenario is that
# only the server runs the file its traceback names (``death_owner``).
def main() -> None:
    work = tempfile.mkdtemp(prefix="diag-grpc-client-")
    log = open(os.path.join(work, "job.log"), "a", buffering=1)  # noqa: SIM115
    ready_out = os.fdopen(os.dup(1), "w")
    os.dup2(log.fileno(), 2)  # tracebacks (threading's excepthook) go to the job's log
    port_file = os.path.join(work, "port")
    server = subprocess.Popen([sys.executable, SERVER, "serve", port_file], stdout=log, stderr=log)
    while not os.path.exists(port_file):
        time.sleep(0.1)
    with open(port_file) as f:
        port = int(f.read())
    predict = grpc.insecure_channel(f"127.0.0.1:{port}").unary_unary("/svc.Model/Predict")
    threading.Timer(1.0, lambda: print(f"READY {server.pid}", file=ready_out, flush=True)).start()
    print(predict(b"features"), file=log)


if __name__ == "__main__":
    main()
