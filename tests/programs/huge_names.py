"""A hostile target (issue #17): 1 MB function and file names, 150 frames deep, in 3 threads.

A stack reader that copies names as they are would hold 150 x 2 MB per thread; diag keeps
4 KiB of each. Prints READY once every thread is parked at depth 150.
"""

import sys
import threading
import time

DEPTH = 150
BIG = 1_000_000


def down(n, ready):
    if n <= 0:
        ready()
        while True:
            time.sleep(3600)
    down(n - 1, ready)


_code = down.__code__
_fields = {"co_name": "x" * BIG, "co_filename": "/" + "f" * BIG}
if sys.version_info >= (3, 11):
    _fields["co_qualname"] = "q" * BIG
down.__code__ = _code.replace(**_fields)

if __name__ == "__main__":
    parked = threading.Semaphore(0)
    threads = [
        threading.Thread(target=down, args=(DEPTH, parked.release), daemon=True, name=f"deep-{i}")
        for i in range(3)
    ]
    for t in threads:
        t.start()

    def all_parked():
        for _ in threads:
            parked.acquire()
        print("READY", flush=True)  # the main thread is at depth 150 too

    down(DEPTH, all_parked)
