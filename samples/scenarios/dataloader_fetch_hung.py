"""deadlocked: a training loop's DataLoader worker fetches a sample from a store outside the
job (a daemon elsewhere, double-forked here) that read the request and never answers. The
loop waits for its next batch, the worker sits in the dataset's ``__getitem__`` in ``recv`` -
the picture of a slow remote fetch (``explore_dataloader_slow``: slow, data-starved). Time
tells them apart: the request has had no byte of answer for over two minutes (tcp_info's
last-data ages), and with no timeout the loop waits for ever. READY comes from the store,
``HUNG_S`` after it read the request, so the capture sees the fetch already that old.

``run(hang=False)``: a worker that fetches, gets its bytes and trains on is the contrast the
recorded ``explore_dataloader_slow`` already pins (slow while fetching, never deadlocked)."""

from __future__ import annotations

import os
import socket
import sys
import time

HUNG_S = 125.0  # past the 2 min after which a fetch with no byte of answer hangs


def _store(listener: socket.socket, out_fd: int) -> None:
    """The store: read one request, answer nothing; READY on the job's stdout once the
    request is ``HUNG_S`` old; leave when the client is gone."""
    conn, _ = listener.accept()
    conn.recv(4096)
    time.sleep(HUNG_S)
    os.write(out_fd, b"READY\n")
    conn.settimeout(None)
    while conn.recv(1):
        pass
    os._exit(0)


def start_store() -> int:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = int(listener.getsockname()[1])
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            _store(listener, sys.stdout.fileno())
        os._exit(0)
    os.wait()
    listener.close()
    return port


def main() -> None:
    import torch
    from torch.utils.data import DataLoader, Dataset

    port = start_store()

    class Shards(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 10**6

        def __getitem__(self, i: int) -> torch.Tensor:
            info = torch.utils.data.get_worker_info()
            if info is not None and info.id == 1 and i >= 4:
                with socket.create_connection(("127.0.0.1", port)) as s:
                    s.sendall(f"GET shard-{i}\n".encode())
                    s.recv(65536)  # no timeout: the store never answers
            return torch.ones(8) * i

    for step, _batch in enumerate(DataLoader(Shards(), batch_size=2, num_workers=2)):
        print(f"step {step}", flush=True)


if __name__ == "__main__":
    main()
