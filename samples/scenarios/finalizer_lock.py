"""deadlocked on itself, through a finalizer: a connection pool returns a connection under its
(plain) pool lock and drops the last reference to the previous one while still holding it; that
connection's ``__del__`` puts itself back through the same pool lock - in the same thread, on
top of the frame that holds it. One thread, no timer: nothing can ever release it."""

from __future__ import annotations

import threading
import time


class Pool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.idle: list = []  # type: ignore[type-arg]
        self.current: Conn | None = None

    def checkin(self, conn: Conn) -> None:
        with self._lock:
            self.idle.append(conn.ident)

    def swap(self, conn: Conn) -> None:
        """Make ``conn`` current; the old one's last reference dies under the lock."""
        with self._lock:
            self.current = conn  # the previous Conn's __del__ runs right here


class Conn:
    def __init__(self, pool: Pool, ident: int) -> None:
        self.pool, self.ident = pool, ident

    def __del__(self) -> None:
        self.pool.checkin(self)  # takes the pool lock its caller holds


def _ready() -> None:
    time.sleep(1.0)
    print("READY", flush=True)


def main() -> None:
    pool = Pool()
    threading.Thread(target=_ready).start()  # exits after READY: one thread remains
    for ident in range(10**9):
        pool.swap(Conn(pool, ident))
        time.sleep(0.01)


if __name__ == "__main__":
    main()
