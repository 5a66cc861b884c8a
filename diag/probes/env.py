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
import re
from typing import Dict, Optional, Tuple

from diag.probes.procfs import ProcFS
from diag.redact import Redactor, is_secret_name

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
