"""``diag ps``, ``diag capture`` without a PID, and the ``--json`` documents (issue 26).

The pure rules (stat parsing, member signals, where a job's tree starts) on made-up process
tables; the command on real jobs this test starts - a RANK-carrying launcher like torchrun, a
real uvicorn server, a job with a stopped rank, a plain shell - and, for "exactly these jobs",
on a host of its own: a new PID namespace with its own /proc (tests/programs/ps_host.py), so
the jobs other tests run beside this one are not on it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping

import pytest
from conftest import DIAG, PROGRAMS, REPO, SCENARIOS, run_diag

from diag.commands.machine_json import json_schema
from diag.probes.job_signals import (
    Member,
    ProcStat,
    classify_member,
    group_roots,
    is_diag,
    parse_proc_stat,
    program_of,
)

jsonschema = pytest.importorskip("jsonschema")

SCHEMA_DOC = REPO / "docs" / "json-schema.json"


def _stat(pid: int, ppid: int, sid: int, comm: str = "python3") -> ProcStat:
    return ProcStat(pid, comm, "S", ppid, sid, 0, pid, 1)


def _roots(
    table: List[ProcStat], members: Mapping[int, Member], launchers: Any = ()
) -> Dict[int, List[int]]:
    return group_roots({s.pid: s for s in table}, members, set(launchers), set())


def test_stat_line_with_parentheses_in_the_name() -> None:
    line = b"42 (a) b (c)) S 7 42 40 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 2 0 1234 1 1 " + b"0 " * 30
    stat = parse_proc_stat(42, line)
    assert stat is not None
    assert (stat.comm, stat.state, stat.ppid, stat.sid) == ("a) b (c)", "S", 7, 40)
    assert (stat.cpu_ticks, stat.threads, stat.start_ticks) == (8, 2, 1234)
    assert parse_proc_stat(42, b"") is None


@pytest.mark.parametrize(
    ("argv", "title", "env", "expected"),
    [
        (("python", "-c", "x"), "python", {"RANK": "1"}, ("env", None)),
        (("sglang::scheduler_TP0",), "sglang::scheduler_TP0", {}, ("title", "sglang")),
        (("VLLM::EngineCore",), "VLLM::EngineCore", {}, ("title", "vllm")),
        (("ray::IDLE",), "ray::IDLE", {}, ("title", "ray")),
        (
            ("/v/bin/python", "/v/bin/torchrun", "--nproc-per-node", "2", "t.py"),
            "",
            {},
            ("launcher", "torchrun"),
        ),
        (("python3", "-m", "torch.distributed.run", "t.py"), "", {}, ("launcher", "torchrun")),
        (("python", "-m", "sglang.launch_server", "--model", "m"), "", {}, ("launcher", "sglang")),
        (("/v/bin/vllm", "serve", "m"), "", {}, ("launcher", "vllm")),
        (("/v/bin/uvicorn", "app:app"), "", {}, ("server", "server")),
        (("python", "-m", "uvicorn", "app:app"), "", {}, ("server", "server")),
        (("python", "train.py"), "", {}, None),
        (("bash",), "bash", {"HOME": "/root"}, None),
        (("/v/bin/vllm", "--version"), "", {}, None),
    ],
)
def test_member_signals(argv: Any, title: str, env: Dict[str, str], expected: Any) -> None:
    assert classify_member(argv, title, env, on_gpu=False) == expected


def test_a_gpu_process_is_a_member_and_diag_never_is() -> None:
    assert classify_member(("python", "serve.py"), "", {}, on_gpu=True) == ("gpu", "gpu")
    assert is_diag(("/v/bin/python", "-m", "diag", "ps"))
    assert is_diag(("/v/bin/diag", "capture"))
    assert is_diag(("python", "-m", "diag.probes.gpu.nvml_worker"))
    assert not is_diag(("python", "-m", "diagnostics"))
    assert program_of(("python", "-u", "train.py")) == "train.py"


def test_a_job_started_in_its_own_session_is_not_its_starters() -> None:
    """The test runner (python, another session) that started a launcher is not the job."""
    table = [
        _stat(100, 1, 100, "bash"),
        _stat(200, 100, 100, "pytest"),
        _stat(300, 200, 300),  # rank_job.py: start_new_session
        _stat(301, 300, 300),
        _stat(302, 300, 300),
    ]
    members = {301: Member("env", None), 302: Member("env", None)}
    assert _roots(table, members) == {300: [301, 302]}


def test_a_job_started_from_a_shell_stops_at_the_shell() -> None:
    table = [_stat(100, 1, 100, "bash"), _stat(200, 100, 100), _stat(201, 200, 100)]
    assert _roots(table, {201: Member("env", None)}) == {200: [201]}


def test_torchrun_ranks_in_sessions_of_their_own_climb_to_the_launcher() -> None:
    table = [
        _stat(100, 1, 100, "bash"),
        _stat(200, 100, 100, "torchrun"),
        _stat(300, 200, 300, "pt_main_thread"),
        _stat(400, 200, 400, "pt_main_thread"),
        _stat(401, 400, 400),  # a DataLoader worker: RANK inherited
    ]
    members = {
        200: Member("launcher", "torchrun"),
        300: Member("env", None),
        400: Member("env", None),
        401: Member("env", None),
    }
    assert _roots(table, members, launchers={200}) == {200: [200, 300, 400, 401]}


def test_two_jobs_stay_two() -> None:
    table = [
        _stat(100, 1, 100, "bash"),
        _stat(200, 100, 200),
        _stat(201, 200, 200),
        _stat(300, 100, 300),
        _stat(301, 300, 300),
    ]
    members = {201: Member("env", None), 301: Member("title", "sglang")}
    assert _roots(table, members) == {200: [201], 300: [301]}


def test_checked_in_schema_is_the_codes() -> None:
    """docs/json-schema.json documents the --json documents; regenerate it with
    ``python -c 'import json; from diag.commands.machine_json import json_schema;
    print(json.dumps(json_schema(), indent=2))' > docs/json-schema.json``."""
    checked_in = json.loads(SCHEMA_DOC.read_text(encoding="utf-8"))
    assert checked_in == json.loads(json.dumps(json_schema()))


def validate(doc: Any) -> None:
    jsonschema.validate(doc, json_schema())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ps_json() -> Dict[str, Any]:
    done = run_diag(["ps", "--json", "--no-gpu"], timeout_s=60)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1, done.stdout  # one document, nothing else
    doc: Dict[str, Any] = json.loads(done.stdout)
    validate(doc)
    return doc


@pytest.mark.slow
def test_ps_lists_real_jobs_and_leaves_out_a_shell_and_itself(spawn: Any) -> None:
    ranks = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "2"])
    stopped = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "3"])
    stopped_rank = json.loads(stopped.lines[-1].split(" ", 1)[1])["1"]
    os.kill(stopped_rank, signal.SIGSTOP)
    port = free_port()
    app = ["ps_uvicorn_app:app", "--app-dir", str(PROGRAMS), "--port", str(port)]
    server = spawn([sys.executable, "-m", "uvicorn", *app], env={"PS_APP_PORT": str(port)})
    shell = spawn(["sh", "-c", "echo READY; exec sleep 600"])
    try:
        proc = subprocess.Popen(
            [*DIAG, "ps", "--json", "--no-gpu"], stdout=subprocess.PIPE, text=True
        )
        out, _ = proc.communicate(timeout=60)
        doc = json.loads(out)
        validate(doc)
        jobs = {job["root_pid"]: job for job in doc["jobs"]}
        assert ranks.pid in jobs and stopped.pid in jobs and server.pid in jobs, jobs
        assert jobs[ranks.pid]["ranks"] == [0, 1]
        assert jobs[ranks.pid]["states"]["S"] == 3
        assert jobs[stopped.pid]["ranks"] == [0, 1, 2]
        assert jobs[stopped.pid]["states"]["T"] == 1
        assert jobs[stopped.pid]["capture"] == f"diag capture --pid {stopped.pid}"
        assert jobs[server.pid]["kind"] == "server"
        assert port in jobs[server.pid]["ports"]
        every_pid = {pid for job in doc["jobs"] for pid in job["pids"]}
        assert shell.pid not in every_pid
        assert proc.pid not in every_pid and os.getpid() not in every_pid
    finally:
        os.kill(stopped_rank, signal.SIGCONT)


@pytest.mark.slow
def test_ps_lines_say_what_each_job_is(spawn: Any) -> None:
    ranks = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "2"])
    done = run_diag(["ps", "--no-gpu"], timeout_s=60)
    assert done.returncode == 0, done.stderr
    mine = [line for line in done.stdout.splitlines() if line.startswith(f"{ranks.pid} ")]
    assert len(mine) == 1, done.stdout
    assert "ranks 0\u20131" in mine[0] and "3 procs" in mine[0] and "sleeping 3" in mine[0]
    assert mine[0].endswith(f"-> diag capture --pid {ranks.pid}")


def _own_host() -> List[Dict[str, Any]]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a PID namespace needs root and unshare")
    done = subprocess.run(
        [
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            sys.executable,
            str(PROGRAMS / "ps_host.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, done.stdout + done.stderr
    results: List[Dict[str, Any]] = json.loads(line[len("RESULT ") :])
    return results


@pytest.mark.slow
def test_on_a_host_of_its_own_exactly_the_jobs_and_capture_without_a_pid() -> None:
    pids, one, lines, as_json, refused = _own_host()
    first, second = pids["pids"]["first"], pids["pids"]["second"]
    # One job: taken, and said so on stderr; stdout is one JSON document.
    assert one["rc"] == 0, one["stderr"]
    assert f"capturing the only ML job on this host: {first} " in one["stderr"]
    doc = json.loads(one["stdout"])
    validate(doc)
    assert doc["kind"] == "capture" and doc["target_pid"] == first
    assert doc["ranks"] == [0, 1] and doc["state"] and doc["verdict"]
    assert set(doc["reports"]) == {"json", "html", "md"}
    assert all(Path(p).is_absolute() for p in doc["reports"].values())
    # Two jobs: exactly two lines, with their ranks; the shell is not one.
    assert lines["rc"] == 0
    assert [ln.split()[0] for ln in lines["stdout"].splitlines()] == [str(first), str(second)]
    jobs = json.loads(as_json["stdout"])["jobs"]
    assert [(j["root_pid"], j["ranks"]) for j in jobs] == [(first, [0, 1]), (second, [0, 1, 2])]
    # capture without a pid refuses (usage error, exit 2) and lists both.
    assert refused["rc"] == 2 and refused["stdout"] == ""
    assert f"diag capture --pid {first}" in refused["stderr"]
    assert f"diag capture --pid {second}" in refused["stderr"]
    assert "2 ML jobs on this host" in refused["stderr"]


@pytest.mark.slow
def test_summary_json_of_a_capture(spawn: Any, tmp_path: Path) -> None:
    ranks = spawn([sys.executable, str(PROGRAMS / "rank_job.py"), "2"])
    out = tmp_path / "cap"
    done = run_diag(
        [
            "capture",
            "--pid",
            str(ranks.pid),
            "--count",
            "2",
            "--interval",
            "0.2",
            "--json",
            "-o",
            str(out),
        ]
    )
    assert done.returncode == 0, done.stderr
    captured = json.loads(done.stdout)
    validate(captured)
    assert "wrote " in done.stderr and "verdict:" in done.stderr  # human lines on stderr
    summary = run_diag(["summary", "--json", str(out.with_suffix(".json"))])
    assert summary.returncode == 0, summary.stderr
    doc = json.loads(summary.stdout)
    validate(doc)
    assert doc["kind"] == "summary" and doc["verdict_source"] == "bundle"
    for key in ("state", "confidence", "verdict", "rule", "suspects", "ranks"):
        assert doc[key] == captured[key]
    assert doc["reports"]["json"] == str(out.with_suffix(".json").resolve())


def test_json_refuses_a_launched_capture() -> None:
    done = run_diag(["capture", "--json", "--", "true"], timeout_s=60)
    assert done.returncode == 2 and done.stdout == ""
    assert "summary --json" in done.stderr


HAVE_TORCH = (Path(sys.executable).parent / "torchrun").exists()


@pytest.mark.slow
@pytest.mark.torch
@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (make install adds it)")
def test_a_real_torchrun_gloo_job_is_one_job_rooted_at_torchrun(spawn: Any) -> None:
    """torchrun's elastic agent starts each rank in a session of its own: the job is still
    one line, rooted at torchrun, with its ranks and the gloo/TCPStore ports they listen on."""
    job = spawn(
        [sys.executable, str(SCENARIOS / "torchrun_allgather.py")], cwd=SCENARIOS, timeout_s=180
    )
    doc = _ps_json()
    mine = [j for j in doc["jobs"] if job.pid in j["pids"]]
    assert len(mine) == 1, doc["jobs"]
    assert mine[0]["root_pid"] == job.pid and mine[0]["kind"] == "torchrun"
    assert mine[0]["ranks"] == [0, 1, 2] and mine[0]["world_size"] == 3
    assert mine[0]["ports"], mine[0]  # the TCPStore and gloo's listeners


@pytest.mark.slow
def test_a_process_holding_a_gpu_is_a_job(fake_nvml: pytest.MonkeyPatch, spawn: Any) -> None:
    """A Python server with no rank, no launcher and no known title, that NVML lists on a GPU
    (the fake binding: PID i on device i)."""
    server = spawn(
        [sys.executable, "-c", "import time; print('READY', flush=True); time.sleep(600)"]
    )
    fake_nvml.setenv("FAKE_NVML_SCENARIO", "gpus")
    fake_nvml.setenv("FAKE_NVML_COUNT", "2")
    fake_nvml.setenv("FAKE_NVML_PIDS", f"999999999,{server.pid}")  # device 0: nobody here
    done = run_diag(["ps", "--json"], timeout_s=60)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    validate(doc)
    assert doc["gpu"] == "nvml"
    mine = [j for j in doc["jobs"] if j["root_pid"] == server.pid]
    assert len(mine) == 1, doc["jobs"]
    assert mine[0]["kind"] == "gpu" and mine[0]["gpus"] == [1] and mine[0]["signals"] == ["gpu"]


@pytest.mark.slow
def test_no_secret_of_a_job_reaches_ps_output(spawn: Any, tmp_path: Path) -> None:
    secrets = {
        "argv": "sk-PsArgvSecret0123456789abcdefXYZ",
        "url": "PsUrlPass0123456789",
        "env": "hf_PsEnvSecret0123456789abcdefghij",
    }
    job = spawn(
        [
            sys.executable,
            str(PROGRAMS / "secret_server.py"),
            "--api-key",
            secrets["argv"],
            "--db",
            f"postgres://admin:{secrets['url']}@db.internal:5432/x",
            "--log-file",
            str(tmp_path / "log"),
            "--log-token",
            "tok_PsLogSecret0123456789abcdef",
        ],
        env={"HF_TOKEN": secrets["env"], "RANK": "0"},
    )
    human = run_diag(["ps", "--no-gpu"], timeout_s=60)
    machine = run_diag(["ps", "--json", "--no-gpu"], timeout_s=60)
    assert f"{job.pid} " in human.stdout
    assert job.pid in {j["root_pid"] for j in json.loads(machine.stdout)["jobs"]}
    for text in (human.stdout, human.stderr, machine.stdout, machine.stderr):
        for secret in secrets.values():
            assert secret not in text
