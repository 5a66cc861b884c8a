"""torch.utils.data's DataLoader: a training loop waits in it for its next batch while worker
processes (``_worker_loop``) call the dataset.

Facts from torch 2.6 torch/utils/data/dataloader.py and _utils/worker.py.
"""

from __future__ import annotations

from diag.frameworks.base import Pack

PACK = Pack(
    name="PyTorch DataLoader",
    key="dataloader",
    # "utils/data", not "torch/utils/data/": py-spy may shorten a path to its last parts.
    modules=("utils/data",),
    # _MultiProcessingDataLoaderIter._try_get_data / _get_data / _next_data, __next__.
    batch_wait_frames=("._try_get_data", "._get_data", "._next_data", ".__next__"),
    worker_loops=frozenset({"_worker_loop"}),
    pool_worker_files=("torch/utils/data/_utils/worker.py",),
    sources=("torch 2.6 torch/utils/data/dataloader.py, _utils/worker.py",),
)
