"""deadlocked: the classic fork-with-threads hang. A metrics thread holds a lock at the moment
the DataLoader forks its workers; each worker inherits the lock *held*, with no thread left to
release it, and blocks forever in ``__getitem__``. The main process keeps polling the worker
queue (a timed wait that wakes every few seconds) and its metrics thread keeps ticking - the
job looks alive, yet no batch will ever come."""

from __future__ import annotations

import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset

stats_lock = threading.Lock()
stats = {"samples": 0}
holding = threading.Event()


def flush_metrics() -> None:
    while True:
        with stats_lock:
            holding.set()
            time.sleep(5)  # "writing" the metrics while holding the lock


class Tokenized(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, index: int) -> torch.Tensor:
        with stats_lock:  # held forever in the forked worker
            stats["samples"] += 1
        return torch.full((16,), float(index))


def main() -> None:
    threading.Thread(target=flush_metrics, name="metrics", daemon=True).start()
    holding.wait()  # the fork below happens while the metrics thread holds the lock
    loader = DataLoader(Tokenized(), batch_size=8, num_workers=2, multiprocessing_context="fork")
    batches = iter(loader)
    threading.Timer(3.0, lambda: print("READY", flush=True)).start()
    for batch in batches:
        print(float(batch.sum()), flush=True)


if __name__ == "__main__":
    main()
