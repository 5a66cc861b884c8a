"""Which rank one process says it is: its environment, its argv, or its process title.

Rank detection, first match wins (``rank_source`` records which):
1. environment at exec time: ``RANK`` (torchrun), then MPI launchers' variables;
2. argv: ``--rank N`` / ``--rank=N``, ``--global-rank``, ``--tp-rank``, ``--pp-rank``,
   ``--dp-rank``, ``--ep-rank`` (``--local-rank`` fills local_rank only). ``--node-rank`` is
   deliberately NOT a rank: torchrun's launcher carries ``--node_rank 0`` while its workers
   carry ``RANK=0..N``, and reading both as ranks would give two "rank 0"s;
3. the process title set with setproctitle: ``sglang::scheduler_TP3``,
   ``sglang::scheduler_DP1_TP3`` (TP index), ``VllmWorker rank=2``, ``VLLM::Worker_TP1``.

Pure (a mapping, a list of strings, a title in; a ``RankInfo`` out) and kept apart from the
tree rules in ``diag.probes.proctree`` because this is the table that grows with every new
launcher or inference server, and it is tested on recorded environments and command lines.
"""

from __future__ import annotations

import re
from typing import Mapping, NamedTuple, Optional, Sequence, Tuple

RANK_ENV: Tuple[str, ...] = (
    "RANK",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "MV2_COMM_WORLD_RANK",
    "TP_RANK",
    "SGLANG_DP_RANK",
)
LOCAL_RANK_ENV: Tuple[str, ...] = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")
WORLD_SIZE_ENV: Tuple[str, ...] = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
# The node's index, for launchers that give their children only a local rank (Lightning's
# subprocess launcher: LOCAL_RANK, NODE_RANK, WORLD_SIZE; its own process is local rank 0).
NODE_RANK_ENV: Tuple[str, ...] = ("NODE_RANK", "GROUP_RANK")
RANK_FLAGS: Tuple[str, ...] = (
    "--rank",
    "--global-rank",
    "--tp-rank",
    "--pp-rank",
    "--dp-rank",
    "--ep-rank",
)
LOCAL_RANK_FLAGS: Tuple[str, ...] = ("--local-rank",)
WORLD_SIZE_FLAGS: Tuple[str, ...] = ("--world-size",)
_TITLE_PATTERNS: Tuple[re.Pattern[str], ...] = (
    re.compile(r"(?:^|[_\s:])TP(\d+)(?:$|[_\s])"),
    re.compile(r"\brank[=_ :-]?(\d+)\b", re.IGNORECASE),
    re.compile(r"VllmWorker[-_ ](\d+)\b"),
)


class RankInfo(NamedTuple):
    rank: Optional[int] = None
    local_rank: Optional[int] = None
    world_size: Optional[int] = None
    source: Optional[str] = None
    node_rank: Optional[int] = None


def _int(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    value = value.strip()
    return int(value) if value.isdigit() else None


def _from_env(env: Mapping[str, str], names: Sequence[str]) -> Tuple[Optional[int], str]:
    for name in names:
        value = _int(env.get(name))
        if value is not None:
            return value, name
    return None, ""


def _from_argv(argv: Sequence[str], flags: Sequence[str]) -> Tuple[Optional[int], str]:
    """``--flag N`` or ``--flag=N``; ``--tp_rank`` spellings count as ``--tp-rank``."""
    wanted = set(flags)
    for i, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        name, eq, value = arg.partition("=")
        name = "--" + name[2:].replace("_", "-")
        if name not in wanted:
            continue
        if not eq:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        number = _int(value)
        if number is not None:
            return number, name
    return None, ""


def title_of(cmdline: Sequence[str], comm: str) -> str:
    """setproctitle leaves one argv element (the title); otherwise the kernel name is it."""
    if len(cmdline) == 1:
        return cmdline[0]
    return comm


def rank_from_title(title: str) -> Optional[int]:
    for pattern in _TITLE_PATTERNS:
        match = pattern.search(title)
        if match:
            return int(match.group(1))
    return None


def detect_rank(env: Mapping[str, str], argv: Sequence[str], title: str) -> RankInfo:
    """Apply the precedence in the module docstring."""
    local, _ = _from_env(env, LOCAL_RANK_ENV)
    if local is None:
        local, _ = _from_argv(argv, LOCAL_RANK_FLAGS)
    world, _ = _from_env(env, WORLD_SIZE_ENV)
    if world is None:
        world, _ = _from_argv(argv, WORLD_SIZE_FLAGS)
    node, _ = _from_env(env, NODE_RANK_ENV)
    rank, name = _from_env(env, RANK_ENV)
    if rank is not None:
        return RankInfo(rank, local, world, f"env:{name}", node)
    rank, flag = _from_argv(argv, RANK_FLAGS)
    if rank is not None:
        return RankInfo(rank, local, world, f"argv:{flag}", node)
    rank = rank_from_title(title)
    if rank is not None:
        return RankInfo(rank, local, world, f"title:{title.strip()[:60]}", node)
    return RankInfo(None, local, world, None, node)
