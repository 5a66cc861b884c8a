"""idle: an SGLang-like server with no traffic - the HTTP front-end serves its port, two
``sglang::sched_N`` processes wait on their Pipes for a batch that has not come."""

from __future__ import annotations

import time

from _sglang_like import start


def main() -> None:
    server, _conns = start(n_schedulers=2, spin_on=-1)
    time.sleep(1.5)  # let the spawned schedulers reach conn.recv()
    print("READY", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
