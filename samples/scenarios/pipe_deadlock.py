"""deadlocked: a parent and its worker each wait to receive from the other over a
multiprocessing Pipe (a lost message in a request/reply protocol) - no port, no timer,
nothing outside can wake them."""

from __future__ import annotations

import multiprocessing as mp
import time
from multiprocessing.connection import Connection


def worker(conn: Connection) -> None:
    while True:
        request = conn.recv()  # waits for a request the parent never sends
        conn.send(request)


def main() -> None:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=worker, args=(child,))
    proc.start()
    time.sleep(1.0)  # let the worker reach recv()
    print("READY", flush=True)
    reply = parent.recv()  # waits for a reply to a request it forgot to send
    print(reply)


if __name__ == "__main__":
    main()
