"""A target whose stacks have every shape the in-process reader must get right, then READY.

Deep recursion, a generator and a coroutine on the stack, a method (qualified name), a
non-ASCII function name, code from a file name longer than one speculative read and from a
name outside the BMP, a thread with a long name, a Thread subclass, a thread started with
``_thread`` (no Thread object), and ``extra`` plain parked threads. All park on one Event, so
their stacks hold still for a comparison with py-spy. Works on CPython 3.9+.
"""

from __future__ import annotations

import _thread
import asyncio
import sys
import threading

STOP = threading.Event()
LONG_FILE = "/opt/" + "very-long-directory-name/" * 8 + "module_with_a_long_path.py"
WIDE_FILE = "/tmp/\U0001f600-wide/\u2603.py"
SOURCE = """
def from_elsewhere(stop):
    stop.wait()
"""


def recurse(depth: int) -> None:
    if depth:
        recurse(depth - 1)
    else:
        STOP.wait()


def generator():  # type: ignore[no-untyped-def]
    STOP.wait()
    yield 1


def in_generator() -> None:
    for _ in generator():
        pass


async def coroutine() -> None:
    STOP.wait()


def in_coroutine() -> None:
    asyncio.run(coroutine())


class Worker:
    def method(self) -> None:
        [STOP.wait() for _ in range(1)]


def attendre_été_待つ() -> None:
    STOP.wait()


def compiled_at(filename: str) -> None:
    scope: dict = {}
    exec(compile(SOURCE, filename, "exec"), scope)
    scope["from_elsewhere"](STOP)


class NamedWorker(threading.Thread):
    def __init__(self) -> None:
        self.before_init = True
        super().__init__(name="subclassed", daemon=True)

    def run(self) -> None:
        STOP.wait()


def main() -> None:
    extra = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    targets = [
        ("recursion", lambda: recurse(150)),
        ("generator", in_generator),
        ("coroutine", in_coroutine),
        ("method", Worker().method),
        ("unicode", attendre_été_待つ),
        ("long-file", lambda: compiled_at(LONG_FILE)),
        ("wide-file", lambda: compiled_at(WIDE_FILE)),
        ("a-thread-name-" + "x" * 120, STOP.wait),
    ]
    targets += [(f"parked-{i}", STOP.wait) for i in range(extra)]
    threads = [threading.Thread(target=fn, name=name, daemon=True) for name, fn in targets]
    threads.append(NamedWorker())
    for t in threads:
        t.start()
    _thread.start_new_thread(STOP.wait, ())
    while len(sys._current_frames()) < len(threads) + 2:
        STOP.wait(0.05)
    STOP.wait(0.3)  # the last ones reach their wait
    print("READY", flush=True)
    STOP.wait()


if __name__ == "__main__":
    main()
