"""The part of a process's environment worth showing in a hang report, with secrets removed.

Why an allowlist: a training job's environment holds cloud credentials, W&B keys and Hugging
Face tokens next to the NCCL/CUDA/rank variables an engineer needs. A denylist misses the next
new credential name; an allowlist of the families that explain distributed hangs (NCCL, CUDA,
torch, launcher rank/world variables, Slurm placement, OpenMP threads, serving frameworks)
shows what matters and nothing else. Inside the allowlist, names that look secret are still
dropped (a hypothetical ``NCCL_..._KEY`` or ``TORCH_..._TOKEN`` never shows), and
every shown value goes through the ``Redactor``, which has learned the values of *all* secret
variables first - so a credential embedded in an allowed value (an NCCL URL with
``user:pass@``) is scrubbed too.

``/proc/P/environ`` is the environment at exec time: variables a program sets later with
``os.environ[...]`` (forked multiprocessing workers often do) are not there.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Callable, Dict, List, Optional, Tuple

from diag.probes.procfs import ProcFS
from diag.redaction.patterns import NOT_SECRET_VALUE_NAMES
from diag.redaction.redact import Redactor, is_secret_name

MAX_VALUE_CHARS = 2048

# Budgets (issue #25). The whole environ block is read for the redactor to learn its secrets
# - a cap that stopped reading early would let a secret placed after it leak - up to
# MAX_ENVIRON_BYTES: exec allows at most a quarter of the stack limit (2 MiB at the usual
# 8 MiB) and a process can only point its environ elsewhere with CAP_SYS_RESOURCE. What is
# *kept* of it (allowlisted names only) is bounded per process in count and bytes; the rest
# is counted, and the collector records how many were not kept.
MAX_ENVIRON_BYTES = 16 << 20
MAX_KEPT_VARS = 256
MAX_KEPT_ENV_BYTES = 64 << 10
# One variable as exec sets it is at most MAX_ARG_STRLEN (32 pages: 128 KiB); a longer run
# without a NUL (an environ pointed elsewhere with PR_SET_MM) is read no further than this,
# its value learned as cut (``Redactor.add_cut_secret``).
MAX_ENTRY_BYTES = 256 << 10
_CHUNK_BYTES = 64 << 10
_LEARN_BATCH_BYTES = 256 << 10  # learned at a time: well under bounded_reads' stall

# Whole families: every variable with one of these prefixes explains some part of a hang.
ALLOWED_PREFIXES = (
    "NCCL_",  # NCCL transport, timeouts, debug
    "RCCL_",
    "NVSHMEM_",
    "UCX_",
    "FI_",  # libfabric (EFA)
    "CUDA_",
    "CUDNN_",
    "CUBLAS_",
    "NVIDIA_",
    "NVTE_",  # Transformer Engine
    "HIP_",
    "ROCR_",
    "HSA_",
    "TORCH_",
    "PYTORCH_",
    "TORCHELASTIC_",
    "TORCHINDUCTOR_",
    "TRITON_",
    "GLOO_",
    "TP_SOCKET",  # tensorpipe interface selection
    "MASTER_",
    "OMP_",
    "KMP_",
    "MKL_",
    "SGLANG_",
    "VLLM_",
    "ACCELERATE_",
    "DEEPSPEED_",
    "RAY_TRAIN_",  # Ray Train's timeouts (health check, worker-group start, collectives)
    "MEGATRON_",
    "XLA_",
    "JAX_",
    "OMPI_COMM_WORLD_",
    "PMI_",
    "PMIX_RANK",
    "MALLOC_",
)

ALLOWED_NAMES = frozenset(
    {
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "GROUP_WORLD_SIZE",
        "ROLE_RANK",
        "ROLE_NAME",
        "ROLE_WORLD_SIZE",
        "NODE_RANK",
        "NNODES",
        "NPROC_PER_NODE",
        "CUDA_VISIBLE_DEVICES",
        "HF_HUB_OFFLINE",
        "HF_HUB_ENABLE_HF_TRANSFER",
        "HF_DATASETS_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HOME",
        "TOKENIZERS_PARALLELISM",  # fork-after-parallelism deadlocks
        "PYTHONPATH",
        "PYTHONUNBUFFERED",
        "PYTHONFAULTHANDLER",
        "PYTHONHASHSEED",
        "LD_LIBRARY_PATH",  # which libnccl/libcuda is loaded
        "LD_PRELOAD",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        # Slurm placement: job, step, task and node identity (not the account or user).
        "SLURM_JOB_ID",
        "SLURM_JOBID",
        "SLURM_JOB_NAME",
        "SLURM_JOB_PARTITION",
        "SLURM_JOB_NUM_NODES",
        "SLURM_JOB_NODELIST",
        "SLURM_NODELIST",
        "SLURM_NNODES",
        "SLURM_NTASKS",
        "SLURM_NTASKS_PER_NODE",
        "SLURM_TASKS_PER_NODE",
        "SLURM_STEP_ID",
        "SLURM_STEPID",
        "SLURM_STEP_NUM_TASKS",
        "SLURM_STEP_NODELIST",
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "SLURM_NODEID",
        "SLURMD_NODENAME",
        "SLURM_ARRAY_JOB_ID",
        "SLURM_ARRAY_TASK_ID",
        "SLURM_RESTART_COUNT",
        "SLURM_GPUS_ON_NODE",
        "SLURM_CPUS_ON_NODE",
        # The time limit: when Slurm will end the job (diag.verdict.startup's kill budget).
        "SLURM_JOB_START_TIME",
        "SLURM_JOB_END_TIME",
    }
)

# Names that look secret by the rule but are switches worth showing (their values are still
# scrubbed like every other value).
_SECRET_LOOKING_BUT_SAFE = frozenset({"TOKENIZERS_PARALLELISM"})

# Parallel-rank variables of Megatron/SGLang/vLLM-style launchers: TP_RANK, PP_SIZE, DP_RANK...
_PARALLEL_RANK_RE = re.compile(r"^(?:TP|PP|DP|EP|CP|SP)_(?:RANK|SIZE|WORLD_SIZE|LOCAL_RANK)$")


def parse_environ(raw: bytes) -> Dict[str, str]:
    """Parse /proc/P/environ (NUL-separated NAME=value). First definition wins, like getenv."""
    env: Dict[str, str] = {}
    for entry in raw.split(b"\0"):
        if not entry or b"=" not in entry:
            continue
        name_b, value_b = entry.split(b"=", 1)
        name = name_b.decode("utf-8", "replace")
        if name and name not in env:
            env[name] = value_b.decode("utf-8", "replace")
    return env


def learn_environ(redactor: Redactor, raw: bytes, cut: bool) -> None:
    """Teach ``redactor`` the secrets of an environ block read whole, or, with ``cut``,
    read up to a bound that ended it inside a variable: that one's value is a cut secret."""
    last = raw.rfind(b"\0") + 1 if cut else len(raw)
    redactor.add_environ(parse_environ(raw[:last]))
    if cut:
        _learn_cut_entry(redactor, raw[last:])


def _learn_cut_entry(redactor: Redactor, entry: bytes) -> None:
    name_b, eq, value_b = entry.partition(b"=")
    name = name_b.decode("utf-8", "replace")
    if eq and is_secret_name(name) and name.upper() not in NOT_SECRET_VALUE_NAMES:
        redactor.add_cut_secret(value_b[:MAX_ENTRY_BYTES].decode("utf-8", "replace"))


class _EnvironStream:
    """Parses an environ block chunk by chunk: the entries that fit ``keep_bytes`` are kept
    (what ``diag ps`` classifies by), every secret value is taught to the redactor in
    batches, and nothing else is held - memory stays a chunk, a batch and one entry."""

    def __init__(self, redactor: Redactor, keep_bytes: int) -> None:
        self.redactor = redactor
        self.keep_bytes = keep_bytes
        self.head: List[bytes] = []
        self.head_bytes = 0
        self.head_full = False
        self.pending = b""
        self.skipping = False  # inside an entry too long to keep: up to its NUL
        self.batch: List[Tuple[str, str]] = []
        self.batch_bytes = 0

    def feed(self, chunk: bytes) -> None:
        if self.skipping:
            nul = chunk.find(b"\0")
            if nul < 0:
                return
            self.skipping = False
            chunk = chunk[nul + 1 :]
        entries = (self.pending + chunk).split(b"\0")
        self.pending = entries.pop()
        for entry in entries:
            self._entry(entry)
        if len(self.pending) > MAX_ENTRY_BYTES:
            _learn_cut_entry(self.redactor, self.pending)
            self.pending = b""
            self.skipping = True

    def _entry(self, entry: bytes) -> None:
        if not entry:
            return
        if not self.head_full:
            if self.head_bytes + len(entry) + 1 <= self.keep_bytes:
                self.head.append(entry)
                self.head_bytes += len(entry) + 1
            else:
                self.head_full = True
        name_b, eq, value_b = entry.partition(b"=")
        if not eq:
            return
        name = name_b.decode("utf-8", "replace")
        if not is_secret_name(name):
            return
        self.batch.append((name, value_b.decode("utf-8", "replace")))
        self.batch_bytes += len(entry)
        if self.batch_bytes >= _LEARN_BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        self.redactor.add_environ(self.batch)  # a name twice: both its values
        self.batch.clear()
        self.batch_bytes = 0

    def finish(self, cut: bool) -> bytes:
        if self.pending and not self.skipping:
            if cut:
                _learn_cut_entry(self.redactor, self.pending)
            else:
                self._entry(self.pending)  # a block without its final NUL
        self.flush()
        return b"\0".join(self.head) + (b"\0" if self.head else b"")


def stream_environ(
    path: str,
    redactor: Redactor,
    keep_bytes: int,
    max_bytes: int = MAX_ENVIRON_BYTES,
    progress: Callable[[], None] = lambda: None,
) -> Optional[bytes]:
    """The first whole variables of the environ block at ``path`` (``keep_bytes`` of them),
    having taught ``redactor`` the secret values of the *whole* block, read in chunks up to
    ``max_bytes``; None when it cannot be opened or read.

    Why not read ``keep_bytes`` and stop: a secret past the bound is still a secret, and a
    job can push it there (30,000 variables before it); ``diag ps`` then printed the token
    wherever the job's argv or title repeated it. The whole block costs a read of at most
    ``max_bytes`` (exec allows 6 MiB) and holds a chunk at a time; ``progress`` is called
    after each chunk (``bounded_reads`` times a stall from the last one).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    stream = _EnvironStream(redactor, keep_bytes)
    left = max_bytes
    try:
        while left > 0:
            chunk = os.read(fd, min(left, _CHUNK_BYTES))
            if not chunk:
                break
            left -= len(chunk)
            stream.feed(chunk)
            progress()
        cut = left <= 0 and bool(os.read(fd, 1))
    except OSError:
        cut = True  # gone or unreadable mid-block: what was read is all diag knows
    finally:
        os.close(fd)
    return stream.finish(cut)


def read_environ(pid: int, procfs: Optional[ProcFS] = None) -> Dict[str, str]:
    """The raw environment of ``pid``; raises OSError (ENOENT gone, EACCES other user)."""
    return parse_environ((procfs or ProcFS()).read_bytes_capped(pid, "environ", MAX_ENVIRON_BYTES))


@functools.lru_cache(maxsize=4096)
def is_allowed(name: str) -> bool:
    """True when the allowlist covers ``name`` and its name does not look secret."""
    if is_secret_name(name) and name not in _SECRET_LOOKING_BUT_SAFE:
        return False
    return (
        name in ALLOWED_NAMES
        or name.startswith(ALLOWED_PREFIXES)
        or _PARALLEL_RANK_RE.match(name) is not None
    )


def select_env(env: Dict[str, str], redactor: Optional[Redactor] = None) -> Dict[str, str]:
    """The allowlisted variables of ``env``, values scrubbed, sorted by name (``bounded_env``
    without the count of those left out)."""
    return bounded_env(env, redactor)[0]


def bounded_env(
    env: Dict[str, str], redactor: Optional[Redactor] = None
) -> Tuple[Dict[str, str], int]:
    """The allowlisted variables of ``env``, values scrubbed, sorted by name, at most
    MAX_KEPT_VARS of them and MAX_KEPT_ENV_BYTES in all; and how many allowlisted ones were
    left out for the budget.

    The redactor first learns every secret value of ``env`` - all of it, whatever is kept
    (pass the capture's shared one so those values are also scrubbed from argv, logs and every
    other process's record).
    """
    scrubber = redactor if redactor is not None else Redactor()
    scrubber.add_environ(env)
    selected: Dict[str, str] = {}
    kept_bytes = 0
    left_out = 0
    for name in sorted(env):
        if not is_allowed(name):
            continue
        size = len(name) + min(len(env[name]), MAX_VALUE_CHARS + 32)
        if len(selected) >= MAX_KEPT_VARS or kept_bytes + size > MAX_KEPT_ENV_BYTES:
            left_out += 1
            continue
        value = scrubber.scrub(env[name])
        if len(value) > MAX_VALUE_CHARS:
            value = value[:MAX_VALUE_CHARS] + f"...[+{len(value) - MAX_VALUE_CHARS} chars]"
        selected[name] = value
        kept_bytes += size
    return selected, left_out
