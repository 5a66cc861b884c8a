"""slow: an SGLang-like server whose scheduler 1 never finishes a batch (a pure-Python loop
at 100% CPU); scheduler 0 answered and waits for the next one; the front-end waits on
scheduler 1's reply in ``Connection.recv``. The spinning scheduler is the one to look at."""

from __future__ import annotations

import time
from multiprocessing.connection import Connection
from typing import List

from _sglang_like import after, start


def generate(conns: List[Connection]) -> List[object]:
    for conn in conns:
        conn.send({"prompt": "hello", "max_new_tokens": 8})
    return [conn.recv() for conn in conns]  # waits for every scheduler's reply


def main() -> None:
    _server, conns = start(n_schedulers=2, spin_on=1)
    time.sleep(1.5)
    after(1.0, lambda: print("READY", flush=True))
    generate(conns)


if __name__ == "__main__":
    main()
