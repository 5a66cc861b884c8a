"""A hostile target (issue #25): many threads, each parked in a distinct deep stack of a
5,000-character function name, so no two stacks share an id.

``THREADS`` threads (argv[1], default 40) each recurse ``300 + (i * 37) % 212`` frames deep
(300-511, below the 512-frame cut) through a function whose name and file name are 5,000
characters (argv[2]), and park. Stack ids differ by depth and by the line the recursion ends
on. Prints READY once every thread is parked.
"""

import sys
import threading
import time

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 40
NAME_CHARS = int(sys.argv[2]) if len(sys.argv) > 2 else 5000


def down(n, ready):
    if n <= 0:
        ready()
        while True:
            time.sleep(3600)
    down(n - 1, ready)


down.__code__ = down.__code__.replace(co_name="d" * NAME_CHARS, co_filename="/" + "f" * NAME_CHARS)
if sys.version_info >= (3, 11):
    down.__code__ = down.__code__.replace(co_qualname="q" * NAME_CHARS)

if __name__ == "__main__":
    sys.setrecursionlimit(2000)
    parked = threading.Semaphore(0)
    for i in range(THREADS):
        depth = 300 + (i * 37) % 212
        threading.Thread(target=down, args=(depth, parked.release), daemon=True).start()
    for _ in range(THREADS):
        parked.acquire()
    print("READY", flush=True)
    while True:
        time.sleep(3600)
