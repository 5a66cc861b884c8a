"""torchrun's elastic agent waiting in its rendezvous: for whom, and with which settings.

Why its own module: an agent in ``SimpleElasticAgent._rendezvous`` before any rank started is
no peer wait of a rank - the processes that end it are the *other nodes'* agents, which a
capture of one host never holds. Its command line says how many nodes it waits for and where
they meet (``--nnodes``, ``--rdzv-endpoint``, ``--rdzv-id``); across the hosts of a merged
bundle, agents that wait with different settings will never meet.

A rank does the same in ``init_process_group`` when it builds its TCPStore: one that does not
host the store connects to MASTER_ADDR:MASTER_PORT and retries while nothing accepts there.
No collective has begun - none can be mismatched - and the process that ends the wait (rank
0, or torchrun's agent, the store's host) is not up or not reachable; if it is only late,
killing the rank loses its place for nothing. The store's host, when captured, listens on
that port: then the store is up and the peer rules judge who is missing.
"""

from __future__ import annotations

import os
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

from diag.frameworks import union
from diag.frameworks.base import AgentOptions
from diag.model import Bundle
from diag.verdict.features import ProcSignals
from diag.verdict.thread_wait import frames_of
from diag.verdict.waits import PEER

# Per launcher agent (its pack's ``agent_*``): what it is started as (the script, or the
# module behind ``python -m``), the rendezvous options it reads, its flags that take no value.
_AGENTS = union.AGENTS
_MAX_ARGS = 256  # argv is the target's: read a bounded prefix
_NO_OPTIONS = AgentOptions(nodes="", endpoint="", run_id="", backend="")


def flag(option: str) -> str:
    """How a report spells an option: ``rdzv_id`` -> ``--rdzv-id``."""
    return "--" + option.replace("_", "-")


class RdzvSettings(NamedTuple):
    nodes: str  # "2", or "1:4" (min:max)
    endpoint: str  # host:port, "" when not given (static: its host and port options)
    run_id: str
    backend: str
    options: AgentOptions = _NO_OPTIONS  # how its agent names them

    def describe(self) -> str:
        nodes = f"{flag(self.options.nodes)}={self.nodes}" if self.nodes else ""
        bits = [nodes, self.backend or "static"]
        bits += [
            f"at {self.endpoint}" if self.endpoint else "",
            f"id {self.run_id}" if self.run_id else "",
        ]
        return ", ".join(b for b in bits if b)


def _agent_at(
    argv: Sequence[str],
) -> Optional[Tuple[int, AgentOptions, FrozenSet[str]]]:
    """Where a launcher agent (its script, or the module after ``-m``) stands in the first 4
    args, with the options it reads and its flags that take no value."""
    for i, a in enumerate(argv[:4]):
        for names, options, flags in _AGENTS:
            if os.path.basename(a) in names or a in names:
                return i, options, flags
    return None


def is_agent(p: ProcSignals) -> bool:
    return _agent_at(p.info.cmdline) is not None


def settings_of(p: ProcSignals) -> RdzvSettings:
    """The rendezvous options of an agent's command line (``--opt=v`` / ``--opt v``, dashes or
    underscores, as its argparse takes them); the first script argument ends them."""
    found: Dict[str, str] = {}
    argv = list(p.info.cmdline[:_MAX_ARGS])
    agent = _agent_at(argv)
    if agent is None:
        return RdzvSettings("1", "", "", "")
    at, opts, flags = agent
    wanted = opts.names()
    i = at + 1
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("-") or arg == "-":
            break  # the training script: what follows are its own arguments
        name, eq, value = arg.lstrip("-").partition("=")
        name = name.replace("-", "_")
        if not eq and name not in flags and i < len(argv):
            value = argv[i]
            i += 1
        if name in wanted:
            found[name] = value[:200]
    endpoint = found.get(opts.endpoint, "")
    host = found.get(opts.static_host, "") if opts.static_host else ""
    if not endpoint and host:
        endpoint = f"{host}:{found.get(opts.static_port, opts.default_port)}"
    nodes = found.get(opts.nodes, opts.default_nodes)
    return RdzvSettings(
        nodes, endpoint, found.get(opts.run_id, ""), found.get(opts.backend, ""), opts
    )


def waiting_agents(procs: Sequence[ProcSignals]) -> List[Tuple[ProcSignals, RdzvSettings]]:
    """Agents whose main thread waits in the rendezvous while no rank of theirs runs."""
    ranked_parents = {
        (p.key[0], p.info.ppid) for p in procs if not p.dead and p.info.role == "rank"
    }
    out: List[Tuple[ProcSignals, RdzvSettings]] = []
    for p in procs:
        wait = p.main_wait
        if p.dead or wait is None or wait.kind != "rendezvous" or not is_agent(p):
            continue
        if (p.key[0], p.pid) in ranked_parents:
            continue  # its ranks run: they are judged, not the agent
        out.append((p, settings_of(p)))
    return out


def mismatch(agents: Sequence[Tuple[ProcSignals, RdzvSettings]]) -> Optional[str]:
    """Across hosts, the settings that differ ("--rdzv-id: a on n1, b on n2"), or None."""
    parts: List[str] = []
    if not agents:
        return None
    opts = agents[0][1].options
    for field, option in (("run_id", opts.run_id), ("endpoint", opts.endpoint),
                          ("nodes", opts.nodes), ("backend", opts.backend)):  # fmt: skip
        seen: Dict[str, List[str]] = {}
        for p, s in agents:
            seen.setdefault(getattr(s, field), []).append(p.key[0] or "this host")
        if len(seen) > 1:
            parts.append(
                f"{flag(option)}: "
                + "; ".join(f"{v or '(none)'} on {', '.join(h[:3])}" for v, h in seen.items())
            )
    return ", ".join(parts) if parts else None


# A rank's own rendezvous: ``init_process_group`` builds its TCPStore here and, on a rank that
# does not host it, connects to MASTER_ADDR:MASTER_PORT - retrying (a sleep) while nothing
# accepts there. The store's host (rank 0, or torchrun's agent) listens on that port.
_STORE_FRAMES = union.STORE_FRAMES


class StoreJoin(NamedTuple):
    """Ranks that wait to reach the c10d store no process of the capture listens for."""

    joiners: List[ProcSignals]
    addr: str  # MASTER_ADDR from their environment, "" when not there
    port: str  # MASTER_PORT, "" when not there (the script set it itself)

    def endpoint(self) -> str:
        return f"{self.addr or '?'}:{self.port or '?'}"


def _in_store(bundle: Bundle, p: ProcSignals) -> bool:
    """Its main thread stood in the store's construction at every alive sample."""
    ids = p.main_stack_ids
    return bool(ids) and all(
        any(f.name in _STORE_FRAMES for f in frames_of(bundle, sid)) for sid in ids
    )


def store_joins(bundle: Bundle, procs: Sequence[ProcSignals]) -> Optional[StoreJoin]:
    """Ranks in ``init_process_group`` still building their TCPStore while no process of the
    capture listens on its port: the store's host is not up (rank 0 not started, failed, on
    another host, or the address is wrong). None when a peer wait of another kind exists (a
    started job, judged by the peer rules) or when the port is listened on here (rank 0 holds
    it: the store is up, the missing rank is what the peer rules name)."""
    alive = [p for p in procs if not p.dead]
    joiners = [
        p
        for p in alive
        if p.main_wait is not None and p.main_wait.kind == "rendezvous" and _in_store(bundle, p)
    ]
    if not joiners or any(p.main_family == PEER and p not in joiners for p in alive):
        return None
    addr, port = next(
        (
            (p.info.env.get(addr_env, "")[:100], p.info.env.get(port_env, "")[:8])
            for p in joiners
            for addr_env, port_env in union.STORE_ENVS
            if p.info.env.get(port_env)
        ),
        ("", ""),
    )
    if port.isdigit():
        if any(int(port) in p.listen_ports for p in alive):
            return None
    elif any(p.listen_ports for p in joiners):
        return None  # the store's host is among them: it listens, the others are late
    return StoreJoin(joiners, addr, port)
