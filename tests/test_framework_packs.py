"""Each pack's facts, pinned through the generic cause module that reads them: a pack edited
(a frame renamed, a title lost) changes one of these answers. The recorded captures of each
framework (``samples/bundles``: sglang_*, vllm_*, gloo_*, torchrun_*, ray_*, ...) pin their
verdicts in test_classify_recorded.py and test_render_golden.py; these pin the facts.
"""

from __future__ import annotations

from typing import Callable, Dict

import pytest

from diag.frames import polled_lock
from diag.frameworks import PACKS, union
from diag.model import Frame, ProcessInfo
from diag.verdict.log_deaths import _subject
from diag.verdict.participants import _LAUNCHER_NAMES, is_receive_collective
from diag.verdict.polling import frame_marker
from diag.verdict.readiness import READY_LINE
from diag.verdict.startup_signs import _COMPILE_LOG, _INIT_NAMES, _LOADER_NAMES, looks_downloaded
from diag.verdict.startup_timeouts import timeouts_of
from diag.verdict.waits import comm_module, frame_kind

SITE = "/usr/lib/python3/dist-packages/"


def _sglang() -> None:
    info = ProcessInfo(pid=1, name="python", cmdline=("python", "-m", "sglang.launch_server"))
    assert [(t.who, t.seconds, t.late) for t in timeouts_of(info)] == [
        ("SGLang's watchdog", 300.0, 1.5)
    ]
    assert _subject("Subprocess scheduler_1 (pid=4242) crashed with exit code -9") == (1, 4242)
    assert READY_LINE.search("The server is fired up and ready to roll!")


def _vllm() -> None:
    dequeue = Frame("MessageQueue.dequeue", SITE + "vllm/distributed/shm_broadcast.py")
    assert frame_kind(dequeue) == "collective"
    assert is_receive_collective("MessageQueue.dequeue")
    assert _subject("Worker proc VllmWorker-1 died unexpectedly")[0] == 1
    assert _COMPILE_LOG.search("Capturing CUDA graphs (decode, FULL): 100%")
    info = ProcessInfo(pid=1, env={"VLLM_RPC_TIMEOUT": "5000"})
    assert [t.seconds for t in timeouts_of(info)] == [5.0]


def _torch() -> None:
    assert frame_kind(Frame("synchronize", SITE + "torch/cuda/__init__.py")) == "synchronize"
    assert frame_marker(Frame("Future.done", SITE + "torch/futures/__init__.py")) == "completion"


def _torch_distributed() -> None:
    c10d = SITE + "torch/distributed/distributed_c10d.py"
    assert frame_kind(Frame("init_process_group", c10d)) == "rendezvous"
    assert frame_kind(Frame("all_reduce", c10d)) == "collective"
    assert "_create_c10d_store" in union.STORE_FRAMES and "init_process_group" in _INIT_NAMES
    assert "pt_gloo_runloop".startswith(union.BACKEND_THREADS)
    info = ProcessInfo(pid=1, env={"TORCH_NCCL_ENABLE_MONITORING": "1"})
    assert [t.seconds for t in timeouts_of(info)] == [480.0]


def _torchrun() -> None:
    elastic = SITE + "torch/distributed/elastic/agent/server/local_elastic_agent.py"
    agent = Frame("LocalElasticAgent._monitor_workers", elastic)
    assert frame_kind(agent) == "child"
    assert "torchrun" in _LAUNCHER_NAMES and "torch.distributed.run" in union.AGENT_ARGV


def _deepspeed() -> None:
    assert comm_module(Frame("barrier", SITE + "deepspeed/comm/comm.py"))
    assert not comm_module(Frame("barrier", "/home/me/train/comm/sync.py"))  # the job's own


def _accelerate() -> None:
    pack = union.pack("accelerate")
    assert union.recognised(pack, "accelerate", ("/usr/bin/accelerate", "launch", "train.py"))


def _ray() -> None:
    assert frame_kind(Frame("get_objects", SITE + "ray/_private/worker.py")) == "result"
    assert "raylet" in union.HELPER_MARKERS and "gcs_client_io_s" in union.RPC_THREADS


def _servers() -> None:
    assert READY_LINE.search("INFO:     Application startup complete.")
    assert READY_LINE.search("INFO:     Uvicorn running on http://0.0.0.0:8000")
    assert "uvicorn" in union.PLUMBING_PACKAGES


def _dataloader() -> None:
    assert "_MultiProcessingDataLoaderIter._next_data".endswith(union.BATCH_WAIT_FRAMES)
    assert "_worker_loop" in union.WORKER_LOOPS


def _hf() -> None:
    assert "from_pretrained" in _LOADER_NAMES
    assert looks_downloaded("/root/.cache/huggingface/hub/models--x/blobs/abc.incomplete")
    assert not looks_downloaded("/ckpt/step_100/model.safetensors")


def _file_locks() -> None:
    lock = Frame("FileLock.acquire", SITE + "filelock/_api.py")
    assert polled_lock([Frame("sleep", "<builtin>"), lock]) == "FileLock.acquire"
    assert "FileBaton.wait" in union.FILE_BATONS


def _fuse() -> None:
    assert union.recognised(union.pack("fuse"), "gcsfuse", ("gcsfuse", "bucket", "/mnt/data"))


def _pyzmq() -> None:
    assert frame_marker(Frame("ZMQError.__init__", SITE + "zmq/error.py")) == "nonblocking"


def _launchers() -> None:
    assert {"srun", "slurmstepd", "mpirun"} <= _LAUNCHER_NAMES
    info = ProcessInfo(pid=1, env={"SLURM_JOB_END_TIME": "1900000000"})
    assert [(t.who, t.deadline_s) for t in timeouts_of(info)] == [
        ("Slurm's time limit", 1900000000.0)
    ]


def _stdlib() -> None:
    assert frame_kind(Frame("Queue.get", "/usr/lib/python3.11/queue.py")) == "queue"
    assert frame_kind(Frame("Pool.wait", "/usr/lib/python3.11/multiprocessing/pool.py")) in (
        "result",  # a pool's AsyncResult.wait: the result rule comes before the child rule
    )
    assert frame_marker(Frame("exists", "<frozen genericpath>")) == "check"
    assert "resource_tracker" in union.HELPER_MARKERS


PINS: Dict[str, Callable[[], None]] = {
    "sglang": _sglang,
    "vllm": _vllm,
    "torch": _torch,
    "torch_distributed": _torch_distributed,
    "torchrun": _torchrun,
    "deepspeed": _deepspeed,
    "accelerate": _accelerate,
    "ray": _ray,
    "servers": _servers,
    "dataloader": _dataloader,
    "hf": _hf,
    "file_locks": _file_locks,
    "fuse": _fuse,
    "pyzmq": _pyzmq,
    "launchers": _launchers,
    "stdlib": _stdlib,
}


@pytest.mark.parametrize("key", sorted(PINS))
def test_pack_facts(key: str) -> None:
    assert key in {p.key for p in PACKS}
    PINS[key]()
