"""A command for launch-mode tests: ``exit CODE`` or ``signals`` (see each mode's docstring).

Every line the tests look for is printed with flush=True: the child's stdout is a pipe.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from types import FrameType
from typing import Optional


def exit_with(code: int) -> None:
    """Write to both streams (one secret-bearing line, one unterminated line), then exit."""
    print("hello from stdout", flush=True)
    print("hello from stderr", file=sys.stderr, flush=True)
    print(f"connecting with token={os.environ.get('LAUNCH_SECRET', '')}", flush=True)
    sys.stdout.write("last words without newline")
    sys.stdout.flush()
    sys.exit(code)


def on_signal(who: str) -> None:
    def handler(signum: int, _frame: Optional[FrameType]) -> None:
        print(f"{who} got {signal.Signals(signum).name}", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def signals() -> None:
    """Parent and a grandchild in one process group; the grandchild says READY once both
    handlers are installed, and each reports the signal it receives."""
    on_signal("child")
    grandchild = subprocess.Popen([sys.executable, __file__, "grandchild"])
    while True:
        time.sleep(0.1)
        if grandchild.poll() is not None:
            time.sleep(0.5)  # a moment for our own signal to arrive before exiting on our own


def grandchild() -> None:
    on_signal("grandchild")
    print("READY", flush=True)
    while True:
        time.sleep(0.1)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "exit":
        exit_with(int(sys.argv[2]))
    elif mode == "signals":
        signals()
    elif mode == "grandchild":
        grandchild()
