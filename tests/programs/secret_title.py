"""A job that hides its secrets where bounded reads and argv rules missed them (issue 32).

``secret_title.py TITLE`` rewrites its own command line in place, as setproctitle does: the
whole argv area becomes TITLE and NUL padding, so ``/proc/PID/cmdline`` is one string with
spaces (``worker --api-key=V token=W``). Its environment is the test's - a flood of variables
before a planted one pushes that one past what ``diag ps`` keeps of it.

``PLANT_THREAD_SRC`` (reversed, so the environment does not hold the name as is) names a
thread it starts; ``PLANT_LOG`` is a file it writes ``PLANT_LOG_SRC`` to (reversed, lines
split by RS), then a line a second. Prints READY once all of that is in place; sleeps until
killed.
"""

import ctypes
import os
import sys
import threading
import time


def set_title(title: bytes) -> None:
    """Overwrite the argv area [arg_start, arg_end) (``/proc/self/stat`` fields 48, 49)."""
    with open("/proc/self/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    arg_start, arg_end = int(fields[45]), int(fields[46])
    size = arg_end - arg_start
    ctypes.memmove(arg_start, title[: size - 1].ljust(size, b"\0"), size)


if __name__ == "__main__":
    set_title(sys.argv[1].encode())
    stop = threading.Event()
    name = os.environ.get("PLANT_THREAD_SRC", "")[::-1]
    if name:
        threading.Thread(target=stop.wait, name=name, daemon=True).start()
    log = os.environ.get("PLANT_LOG")
    if log:
        with open(log, "a") as fh:
            for line in os.environ.get("PLANT_LOG_SRC", "")[::-1].split("\x1e"):
                fh.write(line + "\n")
    print("READY", flush=True)
    step = 0
    while True:
        step += 1
        if log:
            with open(log, "a") as fh:
                fh.write(f"step {step} loss 1.0\n")
        time.sleep(1.0 if not log else 0.2)
