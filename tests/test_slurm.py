"""``diag capture --slurm-job``: parsers and the srun line protocol on recorded text, job
process discovery on real processes, and the whole path on a real Slurm started here.

The ``slurm_cluster`` fixture starts munged, slurmctld and slurmd (one node: this host) from
tests/slurm/slurm.conf.in with every state file, log and socket in a temporary directory, and
stops them after the session. It skips, printing why, only where Slurm cannot start.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
from conftest import run_diag

from diag.bundle_io import encode_bundle, load_bundle
from diag.errors import EXIT_NO_TARGET, EXIT_REMOTE, DiagError
from diag.merge import merge_bundles
from diag.probes.procfs import ProcFS
from diag.probes.slurm_procs import (
    find_job_processes,
    job_from_cgroup,
    job_from_environ,
    job_roots,
    parse_listpids,
)
from diag.slurm import JobInfo, capture_job, parse_job_line, srun_argv
from diag.slurm_wire import Gathered, encode_chunks

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SLURM = HERE / "slurm"
MERGE_DATA = HERE / "data" / "merge"
SECRET = "hf_PlantedSecretValue0123456789abcdef"

# -- parsers on recorded text --------------------------------------------------------------

LISTPIDS = """PID      JOBID    STEPID   LOCALID GLOBALID
6601     1        0        0       0
6602     1        0        1       1
6585     1        batch    0       0
6589     1        batch    -       -
"""


def test_parse_listpids() -> None:
    assert parse_listpids(LISTPIDS) == [
        (6601, 1, "0"),
        (6602, 1, "0"),
        (6585, 1, "batch"),
        (6589, 1, "batch"),
    ]


def test_job_from_cgroup_v1_and_v2() -> None:
    v1 = "12:pids:/slurm/uid_0/job_42/step_0/task_1\n11:memory:/slurm/uid_0/job_42/step_0\n"
    v2 = "0::/system.slice/slurmstepd.scope/job_77/step_batch/user/task_0\n"
    assert job_from_cgroup(v1) == (42, "0")
    assert job_from_cgroup(v2) == (77, "batch")
    assert job_from_cgroup("0::/user.slice/session-3.scope\n") is None


def test_job_from_environ() -> None:
    assert job_from_environ({"SLURM_JOB_ID": "9", "SLURM_STEP_ID": "0"}) == (9, "0")
    assert job_from_environ({"SLURM_JOBID": "9"}) == (9, None)
    assert job_from_environ({"HOME": "/root"}) is None


def test_job_roots() -> None:
    # batch script 10 -> srun 11; step tasks 20, 21 under slurmstepd 5; 22 forked by 20
    parents = {10: 1, 11: 10, 20: 5, 21: 5, 22: 20}
    assert job_roots(parents, parents) == [10, 20, 21]


def test_parse_job_line() -> None:
    line = (
        "JobId=3 JobName=job.sh UserId=root(0) JobState=RUNNING Reason=None "
        "NodeList=gpu[01-02] BatchHost=gpu01 NumNodes=2 Command=/tmp/job.sh"
    )
    fields = parse_job_line(line)
    assert fields["JobState"] == "RUNNING" and fields["NodeList"] == "gpu[01-02]"


def test_srun_takes_nothing_from_the_job() -> None:
    argv = srun_argv(JobInfo(3, "RUNNING", ("a", "b")), ["diag", "slurm-node", "3"])
    assert argv[:7] == [
        "srun",
        "--overlap",
        "--jobid=3",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=0",
    ]


# -- the line protocol on recorded srun output ---------------------------------------------


def _recorded_two_nodes() -> Gathered:
    """node-a sends its bundle (chunks interleaved with node-b's lines), node-b fails."""
    data = (MERGE_DATA / "node-a.json").read_bytes()
    chunks = list(encode_chunks("node-a", data))
    assert len(chunks) > 1 and all(len(c) < 1000 for c in chunks)
    lines = [
        "DIAG1 hello node-a 1000.000000",
        "DIAG1 hello node-b 2000.000000",
        "DIAG1 pong node-a 100.000000 1000.010000",  # ctrl 100 -> recv 100.020
        "DIAG1 pong node-b 100.000000 2000.500000",
        "DIAG1 pong node-a 101.000000 1001.002000",  # ctrl 101 -> recv 101.004: best
        "some stray output a rank printed",
    ]
    recv = [99.0, 99.5, 100.020, 100.5, 101.004, 101.5]
    gathered = Gathered(["node-a", "node-b"])
    for line, t in zip(lines, recv):
        gathered.feed(line + "\n", t)
    for i, chunk in enumerate(chunks):
        gathered.feed(chunk + "\n", 102.0)
        if i == 0:
            gathered.feed("DIAG1 error node-b no process of Slurm job 3 on node node-b\n", 102)
            gathered.feed("DIAG1 done node-b\n", 102.0)
    gathered.feed("DIAG1 done node-a\n", 103.0)
    return gathered


def test_gathered_reassembles_interleaved_chunks_and_measures_clock() -> None:
    gathered = _recorded_two_nodes()
    assert gathered.all_done()
    (part,) = gathered.parts()
    assert part.label == "node-a"
    assert part.bundle == load_bundle(MERGE_DATA / "node-a.json")
    # NTP estimate from the shortest round trip (101 -> 101.004): 1001.002 - 101.002
    assert part.clock_offset_s == pytest.approx(900.0, abs=1e-6)
    assert part.clock_offset_error_s == pytest.approx(0.002, abs=1e-6)
    (missing,) = gathered.missing(60)
    assert missing.name == "node-b" and "no process of Slurm job 3" in missing.reason
    merged = merge_bundles(gathered.parts(), gathered.missing(60))
    assert [(h.name, h.status) for h in merged.hosts] == [("node-a", "ok"), ("node-b", "failed")]


def test_gathered_reasons_for_silent_nodes() -> None:
    timed = Gathered(["n1", "n2"])
    timed.feed("DIAG1 hello n1 5.0\n", 1.0)
    timed.timed_out = True
    reasons = {m.name: m.reason for m in timed.missing(30)}
    assert reasons["n1"] == "timed out after 30s (started but sent no bundle)"
    assert reasons["n2"] == "timed out after 30s (never started)"

    failed = Gathered(["n1", "n2"])
    failed.stderr = ["srun: error: n2: task 1: Exited with exit code 2"]
    failed.returncode = 2
    reasons = {m.name: m.reason for m in failed.missing(30)}
    assert reasons["n2"] == "srun: srun: error: n2: task 1: Exited with exit code 2"
    assert reasons["n1"].startswith("no bundle from the node (srun exit code 2")

    cut = Gathered(["n1"])
    first = next(encode_chunks("n1", (MERGE_DATA / "node-a.json").read_bytes()))
    cut.feed(first + "\n", 1.0)
    (missing,) = cut.missing(30)
    assert "cut short" in missing.reason


# -- job process discovery on real processes -----------------------------------------------


def test_find_job_processes_by_environ(spawn) -> None:  # type: ignore[no-untyped-def]
    rank = str(SLURM / "rank.py")
    env: Dict[str, str] = {"RANK": "0", "SLURM_JOB_ID": "990001", "SLURM_STEP_ID": "0"}
    task = spawn([sys.executable, rank], env=env)
    own = spawn(  # diag's own step of the same job: left out
        [sys.executable, rank],
        env={**env, "RANK": "1", "SLURM_STEP_ID": "7"},
    )
    other = spawn([sys.executable, rank], env={**env, "SLURM_JOB_ID": "990002"})
    found = find_job_processes(ProcFS(), 990001, own_step="7")
    assert task.pid in found and found[task.pid].found_by == "environ"
    assert own.pid not in found and other.pid not in found
    assert find_job_processes(ProcFS(), 990001, exclude_pids=[task.pid]).keys() == {own.pid}


def test_collector_samples_every_root(spawn) -> None:  # type: ignore[no-untyped-def]
    """A Slurm node's job is several trees (batch script; each step's tasks under slurmstepd):
    one Collector samples them all."""
    from diag.sampler import Collector

    rank = str(SLURM / "rank.py")
    a = spawn([sys.executable, rank], env={"RANK": "0"})
    b = spawn([sys.executable, rank], env={"RANK": "1"})
    collector = Collector(a.pid, extra_roots=[b.pid], pyspy=None)
    sample = collector.take_sample(0).sample
    assert {p.pid for p in sample.processes} == {a.pid, b.pid}
    assert {p.rank for p in collector.processes.values()} == {0, 1}


# -- a real Slurm --------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pid_from(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return 0


def _stop(pid: int) -> None:
    if pid <= 0:
        return
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[:1]
            if state == ["Z"]:
                return
            time.sleep(0.1)


def _our_stepds(conf: Path) -> List[int]:
    """slurmstepd processes of this test cluster (their environment names our slurm.conf)."""
    pids = []
    for pid in ProcFS().pids():
        comm = (ProcFS().try_read_text(pid, "comm") or "").strip()
        if comm != "slurmstepd":
            continue
        try:
            if f"SLURM_CONF={conf}".encode() in ProcFS().read_bytes(pid, "environ"):
                pids.append(pid)
        except OSError:
            pass
    return pids


class Cluster:
    def __init__(self, root: Path, node: str) -> None:
        self.root = root
        self.node = node
        self.conf = root / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                list(argv), capture_output=True, text=True, env=self.env, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return subprocess.CompletedProcess(list(argv), 1, "", str(exc))

    def log_tail(self) -> str:
        out = []
        for name in ("munge/munged.log", "log/slurmctld.log", "log/slurmd.log"):
            path = self.root / name
            if path.exists():
                out.append(f"--- {name}\n" + "\n".join(path.read_text().splitlines()[-8:]))
        return "\n".join(out)

    def submit(self, ntasks: int, extra_env: Dict[str, str]) -> Job:
        out = self.root / f"job-{time.monotonic_ns()}.out"
        env = dict(
            self.env,
            DIAG_TEST_PYTHON=sys.executable,
            DIAG_TEST_RANK=str(SLURM / "rank.py"),
            **extra_env,
        )
        done = subprocess.run(
            ["sbatch", "--parsable", "-O", f"--ntasks={ntasks}", "-o", str(out),
             str(SLURM / "job.sh")],
            capture_output=True, text=True, env=env, timeout=30, cwd=str(self.root),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return Job(self, int(done.stdout.strip().split(";")[0]), out)


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
        pytest.fail(f"job {self.job_id} not READY: {state}\n{self.cluster.log_tail()}")

    def cancel(self) -> None:
        self.cluster.run("scancel", str(self.job_id))


def _start_cluster(root: Path) -> Cluster:
    """Start munged, slurmctld and slurmd; raises RuntimeError with the reason if they can't."""
    missing = [t for t in ("munged", "slurmctld", "slurmd", "sbatch", "srun", "scontrol")
               if shutil.which(t) is None]  # fmt: skip
    if missing:
        raise RuntimeError(f"not installed: {', '.join(missing)} (make install adds slurm-wlm)")
    if os.geteuid() != 0:
        raise RuntimeError("the test cluster runs its daemons as root")
    node = socket.gethostname().split(".")[0]
    cluster = Cluster(root, node)
    for sub in ("munge", "state", "spool", "log"):
        (root / sub).mkdir(mode=0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o600)
    text = (SLURM / "slurm.conf.in").read_text()
    for name, value in {"NODE": node, "DIR": str(root), "CTLD_PORT": str(_free_port()),
                        "SLURMD_PORT": str(_free_port()),
                        "CPUS": str(os.cpu_count() or 1)}.items():  # fmt: skip
        text = text.replace(f"@{name}@", value)
    cluster.conf.write_text(text)
    m = root / "munge"
    started = subprocess.run(
        ["munged", "--force", f"--socket={m}/munge.sock", f"--key-file={key}",
         f"--log-file={m}/munged.log", f"--pid-file={m}/munged.pid",
         f"--seed-file={m}/munged.seed"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if started.returncode != 0:
        raise RuntimeError(f"munged would not start: {started.stderr.strip()}")
    for argv in (["slurmctld", "-i", "-f", str(cluster.conf)], ["slurmd", "-f", str(cluster.conf)]):
        done = subprocess.run(argv, capture_output=True, text=True, env=cluster.env, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} would not start: {done.stderr.strip()}")
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        state = cluster.run("sinfo", "-h", "-n", node, "-o", "%T").stdout.strip()
        if state in ("idle", "mixed", "allocated"):
            return cluster
        time.sleep(0.5)
    raise RuntimeError(f"node {node} never became idle (state {state!r})\n{cluster.log_tail()}")


def _stop_cluster(cluster: Cluster) -> None:
    if not cluster.conf.exists():
        return
    cluster.run("scancel", "--full", "--user=root")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and cluster.run("squeue", "-h").stdout.strip():
        time.sleep(0.3)
    _stop(_pid_from(cluster.root / "slurmd.pid"))
    for pid in _our_stepds(cluster.conf):
        _stop(pid)
    _stop(_pid_from(cluster.root / "slurmctld.pid"))
    _stop(_pid_from(cluster.root / "munge" / "munged.pid"))


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("slurm")
    root.chmod(0o755)  # munged wants every directory above its socket searchable
    try:
        cluster = _start_cluster(root)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"\nSlurm cannot start here: {exc}")
        _stop_cluster(Cluster(root, ""))
        pytest.skip(f"Slurm cannot start here: {exc}")
    try:
        yield cluster
    finally:
        _stop_cluster(cluster)


@pytest.fixture
def slurm_env(slurm_cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    return slurm_cluster


@pytest.mark.slurm
@pytest.mark.slow
def test_capture_slurm_job_finds_every_rank(slurm_cluster: Cluster, tmp_path: Path) -> None:
    job = slurm_cluster.submit(2, {"HF_TOKEN": SECRET})
    try:
        job.wait_ready(2)
        out = tmp_path / "job"
        done = run_diag(
            ["capture", "--slurm-job", str(job.job_id), "--count", "2", "--interval", "0.5",
             "-o", str(out)],
            env=slurm_cluster.env,
        )  # fmt: skip
    finally:
        job.cancel()
    assert done.returncode == 0, done.stderr
    assert "merged 1 of 1 host(s)" in done.stdout and "ranks 0,1" in done.stdout
    bundle = load_bundle(tmp_path / "job.json")
    node = slurm_cluster.node
    ranks = {p.rank: p for p in bundle.processes if p.role == "rank"}
    assert set(ranks) == {0, 1}
    assert all(p.host == node for p in bundle.processes)
    assert any(p.role == "launcher" and "slurm_script" in " ".join(p.cmdline)
               for p in bundle.processes)  # fmt: skip
    assert not any("slurm-node" in " ".join(p.cmdline) for p in bundle.processes)
    (host,) = bundle.hosts
    assert host.name == node and host.status == "ok" and host.samples == 2
    assert host.clock_source == "srun-ping" and host.clock_offset_error_s is not None
    assert f"{node}: 2 sample(s), clock" in done.stderr
    last = bundle.samples[-1]
    for p in last.processes:
        if p.pid in {r.pid for r in ranks.values()}:
            assert p.py_status == "ok"
            frames = [
                f.name for t in p.threads if t.stack_id for f in bundle.stacks[t.stack_id].frames
            ]
            assert "wait_for_peers" in frames
    for path in tmp_path.iterdir():
        assert SECRET not in path.read_text(errors="replace"), path
    assert SECRET[3:20] not in json.dumps(json.loads((tmp_path / "job.json").read_text()))


@pytest.mark.slurm
def test_unknown_job_is_one_line_and_exit_3(slurm_cluster: Cluster, tmp_path: Path) -> None:
    done = run_diag(
        ["capture", "--slurm-job", "987654", "-o", str(tmp_path / "x")], env=slurm_cluster.env
    )
    assert done.returncode == EXIT_NO_TARGET
    assert done.stderr.count("\n") == 1 and "Slurm job 987654 not found" in done.stderr


@pytest.mark.slurm
def test_every_node_failing_is_exit_remote_with_srun_reason(slurm_env: Cluster) -> None:
    job = slurm_env.submit(1, {})
    try:
        job.wait_ready(1)
        with pytest.raises(DiagError) as info:
            capture_job(job.job_id, count=1, diag_cmd=["/bin/false"])
        assert info.value.exit_code == EXIT_REMOTE
        assert slurm_env.node in info.value.message and "srun" in info.value.message
        with pytest.raises(DiagError) as info:
            capture_job(job.job_id, count=1, diag_cmd=["bash", "-c", "sleep 60"], timeout_s=3)
        assert "timed out after 3s (never started)" in info.value.message
    finally:
        job.cancel()


def test_bundle_lines_fit_srun_messages() -> None:
    bundle = load_bundle(MERGE_DATA / "node-b.json")
    lines = list(encode_chunks("a-rather-long-node-name-0042", encode_bundle(bundle)))
    assert max(len(line) for line in lines) < 1000


@pytest.mark.slurm
def test_chunk_lines_survive_real_srun_interleaving(slurm_cluster: Cluster) -> None:
    """The wire's premise, on a real srun: 4 tasks write ~900 chunk lines each at once; lines
    interleave but stay whole, so every blob is rebuilt exactly."""
    sys.path.insert(0, str(SLURM))
    from emit_chunks import blob

    job = slurm_cluster.submit(1, {})
    try:
        job.wait_ready(1)
        done = subprocess.run(
            ["srun", "--overlap", f"--jobid={job.job_id}", "--ntasks=4", "-O",
             sys.executable, str(SLURM / "emit_chunks.py")],
            capture_output=True, text=True, env=dict(slurm_cluster.env, PYTHONPATH=str(REPO)),
            timeout=120,
        )  # fmt: skip
    finally:
        job.cancel()
    assert done.returncode == 0, done.stderr
    gathered = Gathered([f"t{i}" for i in range(4)])
    for line in done.stdout.splitlines():
        gathered.feed(line, 0.0)
    assert gathered.all_done()
    for i in range(4):
        node = gathered.nodes[f"t{i}"]
        assert node.total is not None and node.total > 100
        data = "".join(node.chunks[k] for k in range(node.total))
        assert zlib.decompress(base64.b64decode(data)) == blob(i)
