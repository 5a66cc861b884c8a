"""``diag capture --slurm-job`` without Slurm: parsers and the srun line protocol on recorded
text, job process discovery and the multi-root Collector on real processes.
(tests/test_slurm_live.py runs the whole path on a real Slurm.)"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List, Sequence

import pytest

from diag.bundle.io import encode_bundle, load_bundle
from diag.bundle.merge import merge_bundles
from diag.probes.procfs import ProcFS
from diag.probes.pychild import safe_path_flags
from diag.probes.slurm_procs import (
    find_job_processes,
    job_from_cgroup,
    job_from_environ,
    job_roots,
    parse_listpids,
)
from diag.slurm import controller
from diag.slurm.controller import JobInfo, node_command, parse_job_line, srun_argv
from diag.slurm.srun import srun_env
from diag.slurm.wire import Gathered, encode_chunks

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
    assert reasons["n2"] == "srun: error: n2: task 1: Exited with exit code 2"
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
    from diag.collect.collector import Collector

    rank = str(SLURM / "rank.py")
    a = spawn([sys.executable, rank], env={"RANK": "0"})
    b = spawn([sys.executable, rank], env={"RANK": "1"})
    collector = Collector(a.pid, extra_roots=[b.pid], pyspy=None)
    sample = collector.take_sample(0).sample
    assert {p.pid for p in sample.processes} == {a.pid, b.pid}
    assert {p.rank for p in collector.processes.values()} == {0, 1}


def test_bundle_lines_fit_srun_messages() -> None:
    bundle = load_bundle(MERGE_DATA / "node-b.json")
    lines = list(encode_chunks("a-rather-long-node-name-0042", encode_bundle(bundle)))
    assert max(len(line) for line in lines) < 1000


def test_node_command_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAG_SLURM_NODE_CMD", "apptainer exec '/images/diag 1.sif' diag")
    assert node_command(5, 3, 2.0)[:6] == [
        "apptainer", "exec", "/images/diag 1.sif", "diag", "slurm-node", "5",
    ]  # fmt: skip
    monkeypatch.delenv("DIAG_SLURM_NODE_CMD")
    flags = safe_path_flags()  # -P: the nodes never import from the submit directory
    assert node_command(5, 3, 2.0)[: 3 + len(flags)] == [sys.executable, *flags, "-m", "diag"]


def testsrun_env_drops_the_enclosing_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    monkeypatch.setenv("SLURM_NTASKS", "8")
    monkeypatch.setenv("SLURM_CONF", "/etc/slurm/other.conf")
    env = srun_env("login1:42")
    assert "SLURM_JOB_ID" not in env and "SLURM_NTASKS" not in env
    assert env["SLURM_CONF"] == "/etc/slurm/other.conf"
    assert env["DIAG_SLURM_CONTROLLER"] == "login1:42"


def test_progress_waits_for_every_node() -> None:
    gathered = Gathered(["n1", "n2", "n3"])
    gathered.feed("DIAG1 tick n1 0 4\n", 1.0)
    gathered.feed("DIAG1 tick n1 1 4\n", 1.0)
    assert gathered.progress() is None  # n2 has not sampled yet
    gathered.feed("DIAG1 tick n2 0 1\n", 1.0)
    gathered.feed("DIAG1 error n3 no process of Slurm job 4 on node n3\n", 1.0)
    assert gathered.progress() == (1, 2, 5)
    gathered.feed("DIAG1 tick n2 1 1\n", 1.0)
    assert gathered.progress() == (2, 2, 5)


def test_signalled_names_nodes_whose_collector_was_killed() -> None:
    gathered = Gathered(["n1", "n2", "n3"])
    gathered.stderr = [
        "srun: error: n2: task 1: Killed",
        "srun: error: n3: tasks 2-3: Terminated",
        "srun: error: n1: task 0: Exited with exit code 2",
        "srun: error: elsewhere: task 9: Killed",  # not a node of this capture
    ]
    assert gathered.signalled() == ["n2", "n3"]
    gathered.nodes["n3"].errors.append("no process of Slurm job 3")  # it said why itself
    assert gathered.signalled() == ["n2"]


def _killed_on(node: str, nodes: Sequence[str]) -> Gathered:
    """What srun gave back when every node but ``node`` sent its bundle (node-a's recording)."""
    gathered = Gathered(nodes)
    blob = (MERGE_DATA / "node-a.json").read_bytes()
    for name in nodes:
        if name == node:
            continue
        gathered.feed(f"DIAG1 hello {name} 1.0\n", 1.0)
        for line in encode_chunks(name, blob):
            gathered.feed(line + "\n", 1.1)
        gathered.feed(f"DIAG1 done {name}\n", 1.2)
    gathered.stderr = [f"srun: error: {node}: task 1: Killed"]
    return gathered


def test_killed_collector_is_run_again_while_the_job_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decision on srun's recorded answers (the real kill: test_slurm_live)."""
    runs: List[List[str]] = []

    def fake_srun(argv, nodes, timeout_s, echo=None):  # type: ignore[no-untyped-def]
        runs.append(list(nodes))
        return _killed_on("n2", nodes) if len(runs) == 1 else _killed_on("", nodes)

    monkeypatch.setattr(
        controller, "job_info", lambda job_id: JobInfo(job_id, "RUNNING", ("n1", "n2"))
    )
    monkeypatch.setattr(controller, "run_srun", fake_srun)
    monkeypatch.setattr(controller, "job_state", lambda job_id: "RUNNING")
    done = controller.capture_job(7, count=2, interval_s=0.5)
    assert runs == [["n1", "n2"], ["n2"]]
    assert [(h.name, h.status) for h in done.bundle.hosts] == [("n1", "ok"), ("n2", "ok")]
    assert any(n.startswith("n2: diag's collector there was killed") for n in done.notes)


def test_killed_collector_of_an_ended_job_says_the_job_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs: List[List[str]] = []

    def fake_srun(argv, nodes, timeout_s, echo=None):  # type: ignore[no-untyped-def]
        runs.append(list(nodes))
        return _killed_on("n2", nodes)

    monkeypatch.setattr(
        controller, "job_info", lambda job_id: JobInfo(job_id, "RUNNING", ("n1", "n2"))
    )
    monkeypatch.setattr(controller, "run_srun", fake_srun)
    monkeypatch.setattr(controller, "job_state", lambda job_id: "CANCELLED")
    done = controller.capture_job(7, count=2, interval_s=0.5)
    assert runs == [["n1", "n2"]]  # no second try: the job is over
    (failure,) = [f for f in done.bundle.failures if f.probe == "host"]
    assert failure.host == "n2"
    assert failure.reason.startswith("job 7 ended during the capture (CANCELLED)")
    assert "task 1: Killed" in failure.reason
