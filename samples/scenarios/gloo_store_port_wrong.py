"""idle with the store named, not "progressing: log job.log grew 60 lines": this node's ranks
2, 3 of a 4-rank job are given a MASTER_PORT where another service listens (a notebook
server's HTTP port, outside the job): c10d's store client connects, its ping gets an HTTP
answer ("Ping failed, invalid value returned from server"), and it logs that failure with a
native backtrace ("frame #0: ...", "<omitting python frames>") and retries for ever. The
backtrace lines are the failure's, not news: the log reports only failure. Contrast:
``store_host_late`` (the store's host comes up: progressing)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import _ports

LIFETIME_S = 600  # SIGALRM's default action ends every process then, whatever happens


def rank_main() -> None:
    import torch.distributed as dist

    signal.alarm(LIFETIME_S)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(minutes=30))


def notebook_server(port: int, launcher: int) -> None:
    """Another service on the host, outside the job, that answers whatever it is sent with an
    HTTP error at once (a notebook server, a proxy); gone when the job's launcher is."""
    signal.alarm(LIFETIME_S)
    listener = socket.create_server(("127.0.0.1", port))
    listener.settimeout(1.0)
    while True:
        try:
            os.kill(launcher, 0)
        except ProcessLookupError:
            os._exit(0)
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        with conn:
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


def launch() -> None:
    signal.alarm(LIFETIME_S)
    port = _ports.service_port()
    launcher = os.getpid()
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            notebook_server(port, launcher)
        os._exit(0)
    os.waitpid(middle, 0)
    log = open(os.path.join(tempfile.mkdtemp(prefix="diag-store-"), "job.log"), "a")  # noqa: SIM115
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="4")
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "rank"],
            env=dict(env, RANK=str(r), LOCAL_RANK=str(r - 2)),
            stdout=log,
            stderr=log,
        )
        for r in (2, 3)
    ]
    time.sleep(8.0)  # several tries logged
    print("READY", flush=True)
    for p in procs:
        p.wait()


if __name__ == "__main__":
    if sys.argv[1:] == ["rank"]:
        rank_main()
    else:
        launch()
