"""deadlocked: a Lightning ``Trainer.fit`` with ``strategy="ddp"`` on CPU (gloo), 2 processes
(Lightning's subprocess launcher: the script is rank 0 and starts rank 1). At step 20 rank 1's
``training_step`` starts a ``fetch`` thread to get the next shard's metadata and waits on an
Event for it; the thread dies at once ("Exception in thread fetch: ... RuntimeError" in the
job's log), so rank 1 waits for ever and rank 0 waits in backward for rank 1's gradients.
To the kernel: both ranks asleep, their store and gloo ports listening, and rank 0's
``_ChildProcessObserver`` thread waking every few seconds - a timer beside its wait.

``slow`` (argv): the contrast - rank 1 computes for a long time in that step instead (CPU);
rank 0 waits for it in backward.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

MODE = "slow" if "slow" in sys.argv[1:] else "hang"


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(16, 1)
        self.shard_ready = threading.Event()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        if self.global_step == 20:
            if self.global_rank == 0:
                print("READY", file=sys.__stdout__, flush=True)
            if self.global_rank == 1 and MODE == "hang":

                def fetch() -> None:
                    raise RuntimeError("metadata server refused the connection")

                threading.Thread(target=fetch, name="fetch").start()
                self.shard_ready.wait()  # never set: its setter died
            elif self.global_rank == 1:
                a = torch.randn(300, 300)
                for _ in range(400_000):
                    a = torch.tanh(a @ a.T / 300)
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    log_path = os.environ.get("DIAG_SCENARIO_LOG")
    if log_path is None:  # rank 0: the job's log, inherited by rank 1 (Lightning relaunches us)
        log_path = os.path.join(tempfile.mkdtemp(prefix="diag-lightning-"), "train.log")
        os.environ["DIAG_SCENARIO_LOG"] = log_path
        log = open(log_path, "a", buffering=1)  # noqa: SIM115
        sys.__stdout__ = os.fdopen(os.dup(1), "w")
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)  # tracebacks (threading's excepthook) go to the job's log
    torch.set_num_threads(1)
    x = torch.randn(4096, 16)
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=32)
    trainer = L.Trainer(
        max_epochs=100,
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        enable_progress_bar=False,
        enable_checkpointing=False,
        logger=False,
    )
    trainer.fit(Net(), data)


if __name__ == "__main__":
    main()
