"""What a process is in its framework, from its title or command line: "scheduler TP0",
"detokenizer", "main (HTTP + tokenizer)", "EngineCore", "worker TP1".

Serving frameworks name their processes with setproctitle (one argv element left, the title):
SGLang ``sglang::scheduler`` / ``sglang::scheduler_TP0`` / ``sglang::scheduler_DP1_TP3``,
``sglang::detokenizer``, ``sglang::data_parallel_controller``; vLLM ``VLLM::EngineCore``,
``VLLM::Worker_TP1``. Their front ends keep their command line: ``python -m
sglang.launch_server`` (FastAPI/uvicorn and the TokenizerManager in one process), ``vllm serve``.
A verdict that says "detokenizer (pid 2206) is stopped" is read at once; "pid 2206 is stopped"
sends the reader to ``ps``. The titles and command lines are the packs' (``title_prefix``,
``titled_roles``, ``command_roles``); pure (argv and the kernel's name in), shared by the
verdict's wording and the report's tables.

``role`` is the part the process plays (the report's "role" column): scheduler, detokenizer,
tokenizer, engine core, worker, API server, DP controller; multiprocessing's resource tracker,
which every one of them starts, is a helper. ``indexed`` says the name carries the
process's TP index, which is its rank: "scheduler TP1" needs no "(rank 1)".
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple, Optional, Sequence

from diag.frameworks import union


class FrameworkRole(NamedTuple):
    role: str  # "scheduler", "detokenizer", "API server", "engine core", "worker", ...
    name: str  # "scheduler TP0", "detokenizer", "main (HTTP + tokenizer)", "EngineCore"
    indexed: bool = False  # the name carries the TP index (= the process's rank)


_TP = re.compile(r"(?:^|_)TP\d+(?:$|_)")


def title_of(cmdline: Sequence[str], comm: str) -> str:
    """setproctitle leaves one argv element (the title); otherwise the kernel's name is it."""
    if len(cmdline) == 1:
        return cmdline[0].strip()
    return comm


def _titled(
    match: Optional[re.Match[str]], table: dict[str, tuple[str, str]]
) -> Optional[FrameworkRole]:
    if match is None or match.group(1) not in table:
        return None
    role, name = table[match.group(1)]
    suffix = (match.group(2) or "").strip("_")
    if not suffix:
        return FrameworkRole(role, name)
    return FrameworkRole(role, f"{name} {suffix.replace('_', ' ')}", bool(_TP.search(suffix)))


# The kernel keeps 15 bytes of a process name (TASK_COMM_LEN - 1): a zombie, whose cmdline is
# gone, shows only that cut ("sglang::schedul", "VLLM::EngineCor"), which still says what it was.
COMM_CHARS = 15


def _cut(comm: str) -> Optional[FrameworkRole]:
    for prefix, _, table in union.TITLES:
        for key, (role, name) in table.items():
            full = prefix + key
            if full.startswith(comm) or comm.startswith(full):
                return FrameworkRole(role, name)
    return None


def _commanded(cmdline: Sequence[str]) -> Optional[FrameworkRole]:
    """The role a framework's own command line says (its packs' ``command_roles``)."""
    programs = {os.path.basename(a) for a in cmdline[:2]}
    args = list(cmdline[1:4])
    for c in union.COMMAND_ROLES:
        if (
            (c.fragment and any(c.fragment in a for a in args))
            or (c.module and c.module in args)
            or (c.program and c.program in programs and c.subcommand in args)
        ):
            return FrameworkRole(c.role, c.label)
    return None


# framework_role's answers by (argv, comm): a pure function of them, asked ~10 times a
# process by the verdict and the report - 160,000 times at 16,384 ranks that share one argv.
_ROLES: dict[tuple[tuple[str, ...], str], Optional[FrameworkRole]] = {}
_ROLES_MAX = 65_536


def framework_role(cmdline: Sequence[str], comm: str = "") -> Optional[FrameworkRole]:
    """The framework part this process plays, or None for a process no pack names."""
    key = (tuple(cmdline), comm)
    if key in _ROLES:
        return _ROLES[key]
    if len(_ROLES) >= _ROLES_MAX:  # a bound: argv is the target's
        _ROLES.clear()
    found = _ROLES[key] = _framework_role(cmdline, comm)
    return found


def _framework_role(cmdline: Sequence[str], comm: str) -> Optional[FrameworkRole]:
    title = title_of(cmdline, comm)
    found = next(
        (r for _, rx, table in union.TITLES if (r := _titled(rx.match(title), table))), None
    )
    if found is None and len(title) == COMM_CHARS:
        found = _cut(title)
    if found is not None or len(cmdline) < 2:
        return found
    return _commanded(cmdline)


def named(role: FrameworkRole, rank: Optional[int], pid: int) -> str:
    """How a sentence names one process: "scheduler TP1", "EngineCore (pid 4123)",
    "worker (rank 2)", "main (HTTP + tokenizer, pid 4100)"."""
    tag = (None if role.indexed else f"rank {rank}") if rank is not None else f"pid {pid}"
    if tag is None:
        return role.name
    if role.name.endswith(")"):  # "main (HTTP + tokenizer, pid 4100)"
        return f"{role.name[:-1]}, {tag})"
    return f"{role.name} ({tag})"
