"""Which processes on this node belong to a Slurm job, and which of them are the roots.

Three independent witnesses, because each fails somewhere:
- the cgroup path (``/proc/P/cgroup`` holds ``.../job_<id>/step_<s>/...``) - only with
  ``proctrack/cgroup``, but then it is authoritative and sees processes that scrubbed their env;
- ``SLURM_JOB_ID`` (or the old ``SLURM_JOBID``) in ``/proc/P/environ`` - works with any
  proctrack plugin, misses processes that exec'd with a cleaned environment;
- ``scontrol listpids <job>`` - asks the local slurmd, which knows every step's PIDs whatever
  the plugin; needs slurmd to answer.

A PID any witness names is in. Left out: diag's own step (the ``srun --overlap`` that runs this
collector is a step of the same job), the processes the controller asks to exclude (itself and
its ``srun`` when it runs inside the job), ``slurmstepd`` (Slurm's daemon, not the job's), and
processes whose ``SLURMD_NODENAME`` names another node.
The roots - job processes whose parent is not one - are what the collector walks from: a batch
script, and each step's tasks (their parent is a ``slurmstepd``, not the script).
Parsers are pure; ``find_job_processes`` is the I/O.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Mapping, NamedTuple, Optional, Set, Tuple

from diag.probes.env import parse_environ
from diag.probes.procfs import ProcFS
from diag.probes.threads import parse_task_stat

_CGROUP_JOB = re.compile(r"/job_(\d+)(?:/step_([A-Za-z0-9_.+-]+))?")
# The environment variable the controller sets on its srun, so that srun (and the controller's
# own descendants) are never taken for job processes.
EXCLUDE_ENV = "DIAG_SLURM_CONTROLLER"


class JobProcess(NamedTuple):
    pid: int
    step: Optional[str]  # "0", "batch", "extern", "interactive"; None when not known
    found_by: str  # "cgroup" | "environ" | "listpids"


def job_from_cgroup(text: str) -> Optional[Tuple[int, Optional[str]]]:
    """(job id, step) from /proc/P/cgroup text (v1 or v2 layout), or None."""
    for line in text.splitlines():
        match = _CGROUP_JOB.search(line.split(":", 2)[-1])
        if match:
            return int(match.group(1)), match.group(2)
    return None


def job_from_environ(env: Mapping[str, str]) -> Optional[Tuple[int, Optional[str]]]:
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if job is None or not job.strip().isdigit():
        return None
    return int(job), env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID")


def parse_listpids(text: str) -> List[Tuple[int, int, str]]:
    """``scontrol listpids`` rows as (pid, job, step); the header and odd lines are skipped."""
    rows: List[Tuple[int, int, str]] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].isdigit() and fields[1].isdigit():
            rows.append((int(fields[0]), int(fields[1]), fields[2]))
    return rows


def job_roots(members: Iterable[int], parent_of: Mapping[int, int]) -> List[int]:
    """Members whose parent is not a member: the tops of the job's process trees."""
    pids = set(members)
    return sorted(p for p in pids if parent_of.get(p) not in pids)


def find_job_processes(
    procfs: ProcFS,
    job_id: int,
    own_step: Optional[str] = None,
    exclude_pids: Iterable[int] = (),
    listpids_text: Optional[str] = None,
    node: Optional[str] = None,
) -> Dict[int, JobProcess]:
    """Every process of ``job_id`` on this node (see the module doc for the rules).

    ``node``: this node's Slurm name; a process whose ``SLURMD_NODENAME`` names another node
    belongs there (hosts running several slurmd, or sharing a PID namespace, see them all)."""
    found: Dict[int, JobProcess] = {}
    excluded: Set[int] = set(exclude_pids)
    for pid, job, step in parse_listpids(listpids_text or ""):
        if job == job_id:
            found[pid] = JobProcess(pid, step, "listpids")
    for pid in procfs.pids():
        cgroup = procfs.try_read_text(pid, "cgroup")
        hit = job_from_cgroup(cgroup) if cgroup else None
        how = "cgroup"
        env: Dict[str, str] = {}
        try:
            env = parse_environ(procfs.read_bytes(pid, "environ"))
        except OSError:
            pass
        if EXCLUDE_ENV in env or (node and env.get("SLURMD_NODENAME", node) != node):
            excluded.add(pid)
        if hit is None or hit[0] != job_id:
            hit, how = job_from_environ(env), "environ"
        if hit is not None and hit[0] == job_id and pid not in found:
            found[pid] = JobProcess(pid, hit[1], how)
    keep: Dict[int, JobProcess] = {}
    for pid, proc in found.items():
        if pid in excluded or (own_step is not None and proc.step == own_step):
            continue
        comm = (procfs.try_read_text(pid, "comm") or "").strip()
        if comm.startswith("slurmstepd") or comm == "":
            continue  # Slurm's daemon, or gone since it was listed
        keep[pid] = proc
    return keep


def parents(procfs: ProcFS, pids: Iterable[int]) -> Dict[int, int]:
    out: Dict[int, int] = {}
    for pid in pids:
        text = procfs.try_read_text(pid, "stat")
        if text:
            out[pid] = parse_task_stat(text).ppid
    return out
