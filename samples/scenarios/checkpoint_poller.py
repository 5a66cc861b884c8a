"""idle: an evaluation job waits for the next checkpoint of a training run elsewhere - it polls
the checkpoint directory every second and logs "waiting for a new checkpoint in DIR" when there
is none. No port, no connection, every thread asleep on its own timer, its log growing by one
repeated line: the picture of ``thread_event_heartbeat`` (deadlocked: its timer only says it
lives). Its lines say what it polls for - a directory diag cannot watch - so its wakes may end
its wait: idle, not "kill it"."""

from __future__ import annotations

import logging
import os
import tempfile
import time


def main() -> None:
    where = os.environ.get("DIAG_SCENARIO_DIR") or tempfile.mkdtemp(prefix="diag-ckpt-")
    ckpts = os.path.join(where, "checkpoints")
    os.makedirs(ckpts, exist_ok=True)
    logging.basicConfig(
        filename=os.path.join(where, "eval.log"),
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    seen: set = set()  # type: ignore[type-arg]
    ready = False
    while True:
        new = sorted(set(os.listdir(ckpts)) - seen)
        if not new:
            logging.info("waiting for a new checkpoint in %s", ckpts)
        for name in new:
            logging.info("evaluating %s", name)
            seen.add(name)
        if not ready:
            print("READY", flush=True)
            ready = True
        time.sleep(1.0)


if __name__ == "__main__":
    main()
