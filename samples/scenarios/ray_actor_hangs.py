"""deadlocked: a Ray actor's method waits on a ``threading.Event`` nobody will set (the reply
of a backend that was lost), and the driver waits for its result in ``ray.get`` with no
timeout. The cluster is healthy and idle around them: nothing can complete the call."""

from __future__ import annotations

import os
import tempfile
import threading
import time

import ray
from _ray import init


@ray.remote
class Generator:
    def __init__(self) -> None:
        self.reply = threading.Event()  # set by nothing

    def generate(self, marker: str) -> str:
        with open(marker, "w") as f:
            f.write("started\n")
        self.reply.wait()
        return "never"


def main() -> None:
    init()
    marker = os.path.join(tempfile.mkdtemp(prefix="ray-actor-"), "started")
    actor = Generator.remote()  # type: ignore[attr-defined]
    ref = actor.generate.remote(marker)
    while not os.path.exists(marker):
        time.sleep(0.05)
    print("READY", flush=True)
    print(ray.get(ref), flush=True)


if __name__ == "__main__":
    main()
