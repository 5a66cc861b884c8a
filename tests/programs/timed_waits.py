"""Threads blocked in timed waits of every kind diag reads (and one untimed): each prints its
OS thread id under a label, then the main thread prints READY and sleeps 120 s."""

from __future__ import annotations

import json
import select
import selectors
import socket
import threading
import time

ids = {}
ready = threading.Barrier(7)


def labelled(label: str, wait: object) -> None:
    def run() -> None:
        ids[label] = threading.get_native_id()
        ready.wait()
        wait()  # type: ignore[operator]

    threading.Thread(target=run, daemon=True).start()


a, b = socket.socketpair()
held = threading.Lock()
held.acquire()
poller = select.poll()
poller.register(a, select.POLLIN)
epoll = selectors.EpollSelector()
epoll.register(a, selectors.EVENT_READ)
labelled("event", lambda: threading.Event().wait(timeout=90))
labelled("select", lambda: select.select([a], [], [], 70))
labelled("poll", lambda: poller.poll(50_000))
labelled("epoll", lambda: epoll.select(timeout=40))
labelled("untimed", lambda: held.acquire())
labelled("timed_lock", lambda: held.acquire(timeout=80))
ids["main"] = threading.get_native_id()
ready.wait()
time.sleep(0.3)  # every thread into its wait
print(json.dumps(ids), flush=True)
print("READY", flush=True)
time.sleep(120)
