"""deadlocked: a supervisor and its worker process. The worker's heartbeat thread pings the
supervisor over a socketpair every 0.2 s; the supervisor answers "pong" and logs
"HH:MM:SS supervisor: worker N alive (ping K)". The worker's real work - its main thread
and a loader thread - is stuck on two locks taken in opposite order. The log grows by one
template with only a ping count and a clock moving: liveness, not progress."""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import tempfile
import threading
import time


def worker(sock: socket.socket) -> None:
    a, b = threading.Lock(), threading.Lock()

    def heartbeat() -> None:
        n = 0
        while True:
            sock.sendall(b"ping %d\n" % n)
            sock.recv(64)
            n += 1
            time.sleep(0.2)

    def loader() -> None:
        while True:
            with b:
                time.sleep(0.01)
                with a:
                    pass

    threading.Thread(target=heartbeat, daemon=True, name="heartbeat").start()
    threading.Thread(target=loader, daemon=True, name="loader").start()
    while True:  # the train step: a, then b - the loader takes b, then a
        with a:
            time.sleep(0.01)
            with b:
                pass


def supervisor() -> None:
    s1, s2 = socket.socketpair()
    proc = mp.Process(target=worker, args=(s2,), name="worker")
    proc.start()
    path = os.path.join(tempfile.mkdtemp(prefix="diag-sup-"), "supervisor.log")
    log = open(path, "a", buffering=1)  # noqa: SIM115 - held open for the job's life
    ready = time.time() + 1.2  # a few pings logged before the capture
    while True:
        data = s1.recv(64)
        if not data:
            break
        s1.sendall(b"pong")
        ping = data.decode().strip()
        log.write(f"{time.strftime('%H:%M:%S')} supervisor: worker {proc.pid} alive ({ping})\n")
        if ready and time.time() >= ready:
            print("READY", flush=True)
            ready = 0.0


if __name__ == "__main__":
    mp.set_start_method("fork")
    supervisor()
