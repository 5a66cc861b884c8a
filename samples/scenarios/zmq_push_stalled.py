"""slow (stalled by flow control): a "scheduler" pushes token batches to its "detokenizer" over
a ZeroMQ PUSH/PULL pair (over ``tcp://``; SGLang and vLLM use the same sockets over ``ipc://``);
the detokenizer reads three batches and then stops reading (it sleeps in its own code, blocked
elsewhere). Once the pipe's high-water mark and the socket buffers are full, the scheduler's
blocking ``send`` waits in pyzmq's ``Socket.send`` for the detokenizer to read - a wait with a
party that can end it (the detokenizer, pid in READY), not an idle scheduler.

``--reading``: the contrast - the detokenizer reads steadily (progressing).
The scheduler is the root process; the detokenizer its child."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import zmq

BATCH_BYTES = 64 * 1024
HWM = 16  # messages queued per side before send blocks (default 1000: only slower to fill)


def detokenize(address: str, reading: bool) -> None:
    sock = zmq.Context().socket(zmq.PULL)
    sock.setsockopt(zmq.RCVHWM, HWM)
    sock.connect(address)
    for i in range(10**9):
        sock.recv()
        if i == 2 and not reading:
            time.sleep(10**6)  # blocked elsewhere: the socket is never read again
        if reading:
            time.sleep(0.01)


def schedule(reading: bool) -> None:
    sock = zmq.Context().socket(zmq.PUSH)
    sock.setsockopt(zmq.SNDHWM, HWM)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    address = f"tcp://127.0.0.1:{port}"
    child = subprocess.Popen([sys.executable, __file__, "detokenize", address, str(reading)])
    sent = [0]

    def ready() -> None:
        last = -1
        while sent[0] != last or sent[0] < 3:  # no batch taken for a second: send blocks
            last = sent[0]
            time.sleep(1.0)
            if reading and sent[0] > 50:
                break
        print("READY", child.pid, flush=True)

    threading.Thread(target=ready, daemon=True).start()
    batch = b"t" * BATCH_BYTES
    while True:
        sock.send(batch)  # blocks at the high-water mark until the detokenizer reads
        sent[0] += 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["detokenize"]:
        detokenize(sys.argv[2], sys.argv[3] == "True")
    else:
        schedule("--reading" in sys.argv)
