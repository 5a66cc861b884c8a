"""A real Slurm cluster on this machine for the ``--slurm-job`` tests and ``bench/slurm_fanout``:
munged, slurmctld, and N slurmd, every state file, log and socket in a temporary directory.

Several nodes where the machine allows it: every slurmd but the first runs in its own network
namespace, and one veth per namespace joins it to a Linux bridge on this host (one /24: the
bridge is node 1 and slurmctld, namespace i is node i), so each node has its own address and
port like a real host, srun reaches it over the network, and it can be made unreachable by
stopping it. Every node shares this machine's PID namespace (one /proc): the job's ranks on
node 2 are visible from node 1 too, which diag sorts out by each process's
``SLURMD_NODENAME``. Where namespaces, the bridge or ``ip`` are not available it falls back to
fewer nodes (down to one, on 127.0.0.1) and says why in ``Cluster.fallback``. ``stop_cluster``
deletes every namespace and link it made.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from diag.probes.procfs import ProcFS

HERE = Path(__file__).resolve().parent
SLURM = HERE / "slurm"
TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "squeue", "sinfo")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pid_from(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return 0


def stop_pid(pid: int) -> None:
    """SIGTERM, then SIGKILL, a daemon this fixture started (by its pid file)."""
    if pid <= 0:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            stat = ProcFS().try_read_text(pid, "stat")
            if stat is None or stat.rpartition(")")[2].split()[:1] == ["Z"]:
                return
            time.sleep(0.1)


def _sh(
    argv: Sequence[str], env: Optional[Dict[str, str]] = None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(list(argv), 1, "", str(exc))


class Job:
    def __init__(self, cluster: Cluster, job_id: int, out: Path) -> None:
        self.cluster, self.job_id, self.out = cluster, job_id, out

    def wait_ready(self, ranks: int, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.out.read_text() if self.out.exists() else ""
            if text.count("READY") >= ranks:
                return
            time.sleep(0.2)
        state = self.cluster.run("scontrol", "show", "job", str(self.job_id)).stdout
        raise AssertionError(f"job {self.job_id} not READY: {state}\n{self.cluster.log_tail()}")

    def cancel(self) -> None:
        self.cluster.run("scancel", str(self.job_id))


class Cluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self.nodes: List[str] = []
        self.netns: Dict[str, str] = {}  # node -> its network namespace (all but the first)
        self.addrs: Dict[str, str] = {}  # node -> NodeAddr
        self.bridge: Optional[str] = None  # the host's bridge the namespaces hang off
        self.links: List[str] = []  # the host ends of the veth pairs
        self.fallback = ""  # why there are fewer nodes than asked for ("" when not)

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return _sh(argv, self.env)

    def log_tail(self) -> str:
        out = []
        for path in sorted([*self.root.glob("log/*.log"), self.root / "munge" / "munged.log"]):
            if path.exists():
                out.append(f"--- {path.name}\n" + "\n".join(path.read_text().splitlines()[-8:]))
        return "\n".join(out)

    def submit(self, nodes: int, env: Optional[Dict[str, str]] = None) -> Job:
        """A job of one Python rank per node (tests/slurm/job.sh; ``env`` tunes it)."""
        out = self.root / f"job-{time.monotonic_ns()}.out"
        job_env = dict(
            self.env, DIAG_TEST_PYTHON=sys.executable, DIAG_TEST_RANK=str(SLURM / "rank.py")
        )
        job_env.update(env or {})
        done = subprocess.run(
            ["sbatch", "--parsable", "-O", f"--nodes={nodes}", f"--ntasks={nodes}",
             "--ntasks-per-node=1", "-o", str(out), str(SLURM / "job.sh")],
            capture_output=True, text=True, env=job_env, timeout=30, cwd=str(self.root),
        )  # fmt: skip
        if done.returncode != 0:
            raise AssertionError(f"sbatch failed: {done.stderr}")
        return Job(self, int(done.stdout.strip().split(";")[0]), out)

    def slurmd_argv(self, node: str) -> List[str]:
        argv = ["slurmd", "-N", node, "-f", str(self.conf)]
        if node in self.netns:
            return ["nsenter", f"--net=/run/netns/{self.netns[node]}", *argv]
        return argv

    def start_slurmd(self, node: str) -> None:
        (self.root / f"spool-{node}").mkdir(exist_ok=True)
        done = _sh(self.slurmd_argv(node), self.env)
        if done.returncode != 0:
            raise RuntimeError(f"slurmd {node} would not start: {done.stderr.strip()}")

    def stop_slurmd(self, node: str) -> None:
        stop_pid(_pid_from(self.root / f"slurmd-{node}.pid"))

    def wait_idle(self, timeout_s: float = 40.0) -> None:
        deadline = time.monotonic() + timeout_s
        states = ""
        while time.monotonic() < deadline:
            states = self.run("sinfo", "-h", "-N", "-o", "%N %T").stdout
            idle = {line.split()[0] for line in states.splitlines()
                    if line.split()[1:2] and line.split()[1] in ("idle", "mixed")}  # fmt: skip
            if idle >= set(self.nodes):
                return
            time.sleep(0.5)
        raise RuntimeError(f"nodes never became idle: {states!r}\n{self.log_tail()}")


def _free_net() -> Optional[str]:
    """A 10.213.X /24 no interface here uses (another test session may hold one)."""
    shown = _sh(["ip", "-o", "-4", "addr", "show"])
    if shown.returncode != 0:
        return None
    for x in range(20, 220):
        if f" 10.213.{x}." not in shown.stdout:
            return f"10.213.{x}"
    return None


def _ns_cmd(ns: str, *argv: str) -> List[str]:
    return ["nsenter", f"--net=/run/netns/{ns}", *argv]


def _make_network(cluster: Cluster, tag: str, want: int) -> Tuple[str, List[str]]:
    """The bridge (node 1 and slurmctld: NET.1) and one namespace per further node (NET.i),
    each joined to the bridge by a veth. Returns the /24's prefix and the namespaces made, in
    order; stops at the first one that cannot be made (``cluster.fallback`` says why)."""
    if not (shutil.which("ip") and shutil.which("nsenter")):
        cluster.fallback = "no `ip` / `nsenter` here: one node"
        return "", []
    net = _free_net()
    if net is None:
        cluster.fallback = "no free 10.213.X.0/24 for the bridge: one node"
        return "", []
    bridge = f"dbr{tag}"
    for argv in (
        ["ip", "link", "add", bridge, "type", "bridge"],
        ["ip", "addr", "add", f"{net}.1/24", "dev", bridge],
        ["ip", "link", "set", bridge, "up"],
    ):
        done = _sh(argv)
        if done.returncode != 0:
            _sh(["ip", "link", "del", bridge])
            cluster.fallback = f"`{' '.join(argv)}` failed ({done.stderr.strip()}): one node"
            return "", []
    cluster.bridge = bridge
    made: List[str] = []
    for i in range(2, want + 1):
        ns, here, there = f"diagt{tag}n{i}", f"dv{tag}h{i}", f"dv{tag}n{i}"
        steps = [
            ["ip", "netns", "add", ns],
            ["ip", "link", "add", here, "type", "veth", "peer", "name", there],
            ["ip", "link", "set", there, "netns", ns],
            ["ip", "link", "set", here, "master", bridge],
            ["ip", "link", "set", here, "up"],
            _ns_cmd(ns, "ip", "addr", "add", f"{net}.{i}/24", "dev", there),
            _ns_cmd(ns, "ip", "link", "set", there, "up"),
            _ns_cmd(ns, "ip", "link", "set", "lo", "up"),
        ]
        for argv in steps:
            done = _sh(argv)
            if done.returncode != 0:
                _sh(["ip", "link", "del", here])
                _sh(["ip", "netns", "del", ns])
                cluster.fallback = (
                    f"`{' '.join(argv)}` failed ({done.stderr.strip()}): {i - 1} node(s)"
                )
                return net, made
        made.append(ns)
        cluster.links.append(here)
    return net, made


_TAGS = itertools.count()


def start_cluster(cluster: Cluster, want_nodes: int = 2) -> None:
    """Start it with up to ``want_nodes`` nodes (fewer where namespaces cannot be made: see
    ``cluster.fallback``); raises RuntimeError saying why Slurm cannot start here (then
    stop_cluster cleans up whatever did start)."""
    root = cluster.root
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise RuntimeError(f"not installed: {', '.join(missing)} (make install adds slurm-wlm)")
    if os.geteuid() != 0:
        raise RuntimeError("the test cluster runs its daemons as root")
    tag = f"{os.getpid() % 10000}{next(_TAGS)}"
    net, spaces = _make_network(cluster, tag, want_nodes) if want_nodes > 1 else ("", [])
    cluster.nodes = [f"diag-n{i + 1}" for i in range(1 + len(spaces))]
    cluster.netns = {f"diag-n{i + 2}": ns for i, ns in enumerate(spaces)}
    cluster.addrs = {
        name: f"{net}.{i + 1}" if spaces else "127.0.0.1" for i, name in enumerate(cluster.nodes)
    }
    for sub in ("munge", "state", "log"):
        (root / sub).mkdir(mode=0o700, exist_ok=True)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o600)
    host = socket.gethostname().split(".")[0]
    node_lines = "\n".join(
        f"NodeName={name} NodeAddr={cluster.addrs[name]} "
        f"NodeHostname={host if i == 0 else name} CPUs={os.cpu_count() or 1} State=UNKNOWN"
        for i, name in enumerate(cluster.nodes)
    )
    values = {
        "HOST": host, "CTLD_ADDR": cluster.addrs[cluster.nodes[0]], "DIR": str(root),
        "CTLD_PORT": str(_free_port()), "SLURMD_PORT": str(_free_port()),
        "NODES": node_lines, "NODELIST": ",".join(cluster.nodes),
    }  # fmt: skip
    text = (SLURM / "slurm.conf.in").read_text()
    for name, value in values.items():
        text = text.replace(f"@{name}@", value)
    cluster.conf.write_text(text)
    m = root / "munge"
    started = _sh(
        ["munged", "--force", f"--socket={m}/munge.sock", f"--key-file={key}",
         f"--log-file={m}/munged.log", f"--pid-file={m}/munged.pid",
         f"--seed-file={m}/munged.seed"]
    )  # fmt: skip
    if started.returncode != 0:
        raise RuntimeError(f"munged would not start: {started.stderr.strip()}")
    done = _sh(["slurmctld", "-i", "-f", str(cluster.conf)], cluster.env)
    if done.returncode != 0:
        raise RuntimeError(f"slurmctld would not start: {done.stderr.strip()}")
    for node in cluster.nodes:
        cluster.start_slurmd(node)
    cluster.wait_idle(timeout_s=40.0 + 2.0 * len(cluster.nodes))


def _our_stepds(conf: Path) -> List[int]:
    """slurmstepd processes of this cluster (their environment names our slurm.conf)."""
    procfs, pids = ProcFS(), []
    for pid in procfs.pids():
        if (procfs.try_read_text(pid, "comm") or "").strip() != "slurmstepd":
            continue
        try:
            if f"SLURM_CONF={conf}".encode() in procfs.read_bytes(pid, "environ"):
                pids.append(pid)
        except OSError:
            pass
    return pids


def stop_cluster(cluster: Cluster) -> None:
    if cluster.conf.exists():
        cluster.run("scancel", "--full", "--user=root")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and cluster.run("squeue", "-h").stdout.strip():
            time.sleep(0.3)
        for node in cluster.nodes:
            cluster.stop_slurmd(node)
        for pid in _our_stepds(cluster.conf):
            stop_pid(pid)
        stop_pid(_pid_from(cluster.root / "slurmctld.pid"))
    stop_pid(_pid_from(cluster.root / "munge" / "munged.pid"))
    for link in cluster.links:  # deleting one end deletes the pair, at once (a namespace
        _sh(["ip", "link", "del", link])  # takes its end along only once it is freed)
    for ns in cluster.netns.values():
        _sh(["ip", "netns", "del", ns])
    if cluster.bridge:
        _sh(["ip", "link", "del", cluster.bridge])
