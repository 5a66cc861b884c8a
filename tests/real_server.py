"""What the real-server tests share (tests/test_sglang_real.py, tests/test_vllm_real.py): a
server started in its own session from its own venv, its process tree read from /proc, HTTP
requests to it, ``diag capture --pid <server>`` of it, and the clients left waiting on it.

A framework's test subclasses ``RealServer`` with its name, its ``DIAG_*_RECORD`` variable, its
bundles' file prefix and its one request (``request``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Set, Tuple

import pytest
from conftest import REPO, run_diag


def build_model(python: Path, script: str, out: Path, *extra: str, timeout_s: float) -> Path:
    """Run ``tests/<script> OUT EXTRA...`` with the framework's python: the model, in ``out``."""
    done = subprocess.run(
        [str(python), str(REPO / "tests" / script), str(out), *extra],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def offline_env(venv: Path, hf_home: Path) -> Dict[str, str]:
    """This environment without the test venv's Python, the framework's venv first on PATH,
    offline, and no phoning home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(
        {
            "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HOME": str(hf_home),
            "DO_NOT_TRACK": "1",
        }
    )
    return env


def _children(pid: int) -> List[int]:
    out: List[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except OSError:
            pass
    return out


def _title(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def proc_state(pid: int) -> str:
    """The one-letter state of ``pid`` in /proc (``?`` when it cannot be read)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def launch(
    argv: Sequence[str], log: Path, env: Dict[str, str], cwd: Path
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own, stdout and stderr to ``log``."""
    with open(log, "wb") as sink:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(cwd),
            start_new_session=True,
        )


def keep_copy(path: Path, env_var: str, name: Optional[str] = None) -> None:
    """Copy ``path`` into the directory ``$env_var`` names, if it names one."""
    keep = os.environ.get(env_var)
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(keep) / (name or path.name))


@dataclass
class RealServer:
    """A server process (its session's leader) and what the tests captured of it."""

    NAME: ClassVar[str] = "server"  # in failure messages
    RECORD_ENV: ClassVar[str] = ""  # DIAG_*_RECORD: where bundles and the log are kept
    BUNDLE_PREFIX: ClassVar[str] = ""  # a bundle is <prefix><situation>.json

    proc: subprocess.Popen[bytes]
    port: int
    model: Path
    log: Path
    out: Path
    started_s: float
    bundles: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    pids: Set[int] = field(default_factory=set)  # every process ever seen below it

    @property
    def pid(self) -> int:
        return self.proc.pid

    def descendants(self) -> Dict[int, str]:
        """pid -> process title, every process below the server's main process."""
        found: Dict[int, str] = {}
        todo = [self.pid]
        while todo:
            for child in _children(todo.pop()):
                if child not in found:
                    found[child] = _title(child)
                    todo.append(child)
        self.pids.update(found)
        return found

    def titled(self, prefix: str) -> List[int]:
        return sorted(p for p, t in self.descendants().items() if t.startswith(prefix))

    def one(self, title: str) -> int:
        found = [p for p, t in self.descendants().items() if t == title]
        assert len(found) == 1, self.descendants()
        return found[0]

    def wait_until(self, ready: Callable[[], bool], timeout_s: float, what: str) -> float:
        """Poll ``ready`` until it holds (the seconds since the start), failing the test if the
        server exits or ``timeout_s`` after its start passes."""
        deadline = self.started_s + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"{self.NAME} exited {self.proc.returncode}: {self.tail()}")
            if ready():
                return time.monotonic() - self.started_s
            time.sleep(0.25)
        pytest.fail(f"{self.NAME} not {what} within {timeout_s}s: {self.tail()}")

    def post(self, path: str, body: Dict[str, Any], timeout_s: float) -> Dict[str, Any]:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return dict(json.loads(r.read()))

    def request(self, max_tokens: int = 16, timeout_s: float = 60.0) -> Dict[str, Any]:
        """One generation of ``max_tokens`` tokens, the framework's own API."""
        raise NotImplementedError

    def tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Keep the log (``RECORD_ENV``), continue whatever a test stopped, kill the session."""
        keep_copy(self.log, self.RECORD_ENV, f"{self.out.name}-serve.log")
        self.descendants()
        for pid in [self.pid, *self.pids]:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass


# -- capturing --------------------------------------------------------------------------------


def capture(server: RealServer, situation: str, *flags: str) -> Dict[str, Any]:
    """``diag capture --pid <server>`` (defaults unless ``flags``); the bundle, with its
    stdout, kept in ``server.bundles`` (and in ``$RECORD_ENV``)."""
    out = server.out / f"{server.BUNDLE_PREFIX}{situation}.json"
    t0 = time.monotonic()
    argv = ["capture", "--pid", str(server.pid), "-o", str(out), *flags]
    done = run_diag(argv, timeout_s=300)
    assert done.returncode == 0, done.stderr[-3000:]
    bundle: Dict[str, Any] = json.loads(out.read_text())
    bundle["_stdout"] = done.stdout
    bundle["_capture_s"] = time.monotonic() - t0
    server.bundles[situation] = bundle
    keep_copy(out, server.RECORD_ENV)
    return bundle


def verdict_line(bundle: Dict[str, Any]) -> str:
    lines = [ln for ln in bundle["_stdout"].splitlines() if ln.startswith("verdict:")]
    return lines[-1] if lines else ""


def suspect_pids(bundle: Dict[str, Any]) -> List[int]:
    return [s["pid"] for s in bundle["verdict"].get("suspects", [])]


def assert_calm(bundle: Dict[str, Any], state: str) -> None:
    """The verdict is ``state`` (idle, progressing) and names no suspect."""
    assert bundle["verdict"]["state"] == state, verdict_line(bundle)
    assert suspect_pids(bundle) == [], verdict_line(bundle)


def captured(server: RealServer, situation: str) -> Dict[str, Any]:
    """The bundle an earlier test captured, or skip."""
    if situation not in server.bundles:
        pytest.skip(f"situation {situation} was not captured (its test did not run)")
    return server.bundles[situation]


# -- clients ----------------------------------------------------------------------------------


class Client:
    """Threads sending requests until ``stop`` (bounded in count and time)."""

    def __init__(
        self, server: RealServer, threads: int = 1, max_requests: int = 2000, max_s: float = 180.0
    ) -> None:
        self.server = server
        self.done = 0
        self.errors: List[str] = []
        self._stop = threading.Event()
        self._left = max_requests
        self._deadline = time.monotonic() + max_s
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for t in self._threads:
            t.start()

    def _run(self) -> None:
        while not self._stop.is_set() and time.monotonic() < self._deadline:
            with self._lock:
                if self._left <= 0:
                    return
                self._left -= 1
            try:
                self.server.request(max_tokens=64, timeout_s=120)
                with self._lock:
                    self.done += 1
            except Exception as exc:  # recorded, asserted by the test
                self.errors.append(repr(exc))
                return

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=130)


class Waiter:
    """One request in a thread: the client left waiting while a process is stopped."""

    def __init__(self, server: RealServer) -> None:
        self.answer: Optional[Dict[str, Any]] = None
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(server,), daemon=True)

    def _run(self, server: RealServer) -> None:
        try:
            self.answer = server.request(timeout_s=120)
        except Exception as exc:  # the server may be killed under it
            self.error = exc

    def start(self) -> None:
        self._thread.start()

    def result(self, timeout_s: float) -> Optional[Dict[str, Any]]:
        self._thread.join(timeout=timeout_s)
        assert self.error is None, repr(self.error)
        return self.answer


def capture_under_load(server: RealServer, situation: str, threads: int = 2) -> Dict[str, Any]:
    """Capture while ``threads`` clients send requests; some must be answered, none fail."""
    client = Client(server, threads=threads)
    try:
        time.sleep(2)
        bundle = capture(server, situation)
    finally:
        client.stop()
    assert client.done > 0 and not client.errors, client.errors[:3]
    return bundle


def stopped_with_request(
    server: RealServer,
    pid: int,
    situation: str,
    settle_s: float,
    while_stopped: Optional[Callable[[], None]] = None,
) -> Tuple[Dict[str, Any], Optional[Dict[str, Any]]]:
    """SIGSTOP ``pid``, send a request, wait ``settle_s``, check it stopped (and run
    ``while_stopped``), capture, SIGCONT; the bundle, and the request's answer once it
    completed (within 120 s)."""
    os.kill(pid, signal.SIGSTOP)
    waiter = Waiter(server)
    try:
        waiter.start()
        time.sleep(settle_s)
        assert proc_state(pid) == "T"
        if while_stopped is not None:
            while_stopped()
        bundle = capture(server, situation)
    finally:
        os.kill(pid, signal.SIGCONT)
    return bundle, waiter.result(timeout_s=120)
