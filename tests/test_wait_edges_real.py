"""The wait-for graph on real programs (#14): one per kind of edge, asserting the edges and
where the chain ends, not only the verdict's state.

Each program prints READY (and the PID of the process its wait depends on) once it sits in the
wait under test; ``diag capture --count 2 --interval 0.5`` samples it. The other end of a pipe,
fifo or socket is found by its inode (``diag.probes.fd_ends``): a sibling holding a fifo's
write end, the server holding a unix socket's peer, a process outside the job holding a
pipe's other end (found by the bounded scan of the host's /proc/*/fd).

Then three stdlib scenarios under the other Pythons diag reads (3.10 through py-spy, 3.13 with
diag's own reader): the same verdict as under the venv's Python.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import pytest
from conftest import SCENARIOS, run_diag, start_ready

pytestmark = pytest.mark.slow

HAVE_TORCH = importlib.util.find_spec("torch") is not None
QUICK = ["--count", "2", "--interval", "0.5"]

SELF_LOCK = r"""
import threading
lock = threading.Lock()
lock.acquire()
print("READY", flush=True)
lock.acquire()  # the only thread waits for itself
"""

PIPE = r"""
import os, subprocess, sys
r, w = os.pipe()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10**6)"], pass_fds=(w,))
os.close(w)
print("READY", child.pid, flush=True)
os.read(r, 1)  # the writer sleeps forever
"""

FIFO_OPEN = r"""
import os, tempfile, threading
fifo = os.path.join(tempfile.mkdtemp(prefix="diag-fifo-"), "f")
os.mkfifo(fifo)
threading.Timer(0.3, lambda: print("READY", flush=True)).start()
open(fifo, "rb").read()  # nobody ever opens the write end
"""

# A launcher starts the reader and the writer of a fifo: they are siblings.
FIFO_SIBLINGS = r"""
import os, subprocess, sys, tempfile, time
fifo = os.path.join(tempfile.mkdtemp(prefix="diag-fifo-"), "f")
os.mkfifo(fifo)
reader = subprocess.Popen(
    [sys.executable, "-c", "import sys; open(sys.argv[1], 'rb').read(1)", fifo]
)
writer = subprocess.Popen(
    [sys.executable, "-c", "import sys, time; f = open(sys.argv[1], 'wb'); time.sleep(10**6)", fifo]
)
while not os.path.exists(f"/proc/{reader.pid}/wchan") or "pipe_read" not in open(
    f"/proc/{reader.pid}/wchan"
).read():
    time.sleep(0.05)
print("READY", reader.pid, writer.pid, flush=True)
time.sleep(10**6)
"""

UNIX = r"""
import os, socket, subprocess, sys, tempfile
path = os.path.join(tempfile.mkdtemp(prefix="diag-unix-"), "s")
server = subprocess.Popen([sys.executable, "-c", '''
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()
print("up", flush=True)
conn, _ = s.accept(); conn.recv(100); time.sleep(10**6)
''', path], stdout=subprocess.PIPE)
server.stdout.readline()
c = socket.socket(socket.AF_UNIX); c.connect(path); c.sendall(b"ping")
print("READY", server.pid, flush=True)
c.recv(100)  # the server read the request and never answers
"""

TCP = r"""
import socket, subprocess, sys
server = subprocess.Popen([sys.executable, "-c", '''
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
conn, _ = s.accept(); conn.recv(100); time.sleep(10**6)
'''], stdout=subprocess.PIPE)
port = int(server.stdout.readline())
c = socket.create_connection(("127.0.0.1", port)); c.sendall(b"ping")
print("READY", server.pid, flush=True)
c.recv(100)  # the server read the request and never answers
"""

# The job reads a fifo whose writer is a process it did not start (the test starts it).
FIFO_OUTSIDE = r"""
import sys, threading
threading.Timer(0.3, lambda: print("READY", flush=True)).start()
open(sys.argv[1], "rb").read(1)
"""

# A launcher starts a writer and a reader of one pipe: the reader never reads, the writer
# fills the pipe and blocks (write-full); its parent holds no end of it.
PIPE_FULL_SIBLINGS = r"""
import os, subprocess, sys, time
r, w = os.pipe()
reader = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10**6)"], pass_fds=(r,))
writer = subprocess.Popen(
    [sys.executable, "-c", f"import os; os.write({w}, b'x' * (1 << 20))"], pass_fds=(w,)
)
os.close(r)
os.close(w)
while "pipe_write" not in open(f"/proc/{writer.pid}/wchan").read():
    time.sleep(0.05)
print("READY", writer.pid, reader.pid, flush=True)
time.sleep(10**6)
"""

# A connected TCP peer that sent nothing and reads nothing: no request, yet it holds the end.
TCP_SILENT = r"""
import socket, subprocess, sys
server = subprocess.Popen([sys.executable, "-c", '''
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
conn, _ = s.accept(); time.sleep(10**6)
'''], stdout=subprocess.PIPE)
port = int(server.stdout.readline())
c = socket.create_connection(("127.0.0.1", port))
print("READY", server.pid, flush=True)
c.recv(100)
"""

# The job's client of a server outside the job (the test's own listener).
TCP_OUTSIDE = r"""
import socket, sys, threading
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
threading.Timer(0.3, lambda: print("READY", flush=True)).start()
c.recv(100)
"""

CHILD = r"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(10**6)"])
print("READY", child.pid, flush=True)
child.wait()
"""

ZOMBIE = r"""
import os, subprocess, sys, time
r, w = os.pipe()
child = subprocess.Popen([sys.executable, "-c", "pass"], pass_fds=(w,))
while open(f"/proc/{child.pid}/stat").read().rpartition(")")[2].split()[0] != "Z":
    time.sleep(0.05)  # exited, never reaped: a zombie
print("READY", child.pid, flush=True)
os.read(r, 1)  # the parent still holds the write end itself: no EOF, ever
"""


# Popen(stdin=PIPE) and then wait(): the child reads a stdin only its waiting parent could
# write or close - a cycle, not a prompt for a person to answer.
STDIN_FROM_PARENT = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE)
while "pipe_read" not in open(f"/proc/{child.pid}/wchan").read():
    time.sleep(0.05)
print("READY", child.pid, flush=True)
child.wait()
"""

# A launcher whose thread forwards its own stdin to the child's (as mpirun does): the child
# still waits for a person, through the launcher.
STDIN_FORWARDED = r"""
import os, subprocess, sys, threading, time
_, held = os.pipe()  # its own stdin: a pipe kept open and silent, as a terminal nobody types in
os.dup2(_, 0)
child = subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE)
def forward():
    for line in sys.stdin:
        child.stdin.write(line.encode())
        child.stdin.flush()
threading.Thread(target=forward, daemon=True).start()
while "pipe_read" not in open(f"/proc/{child.pid}/wchan").read():
    time.sleep(0.05)
print("READY", child.pid, flush=True)
child.wait()
"""

# The same read of stdin, fed by a process outside the job (`producer | job`): a door.
STDIN_FROM_OUTSIDE = r"""
import os, subprocess, sys, time
r, w = os.pipe()
feeder = subprocess.Popen(["sleep", "1000000"], stdout=w, start_new_session=True)
job = subprocess.Popen([sys.executable, "-c", "input()"], stdin=r)
os.close(r)
os.close(w)
while "pipe_read" not in open(f"/proc/{job.pid}/wchan").read():
    time.sleep(0.05)
print("READY", job.pid, feeder.pid, flush=True)
job.wait()
"""


class Captured:
    def __init__(self, pid: int, ready: str, bundle: Dict[str, Any]) -> None:
        self.pid = pid
        self.others = [int(x) for x in ready.split()[1:]]  # the PIDs printed after READY
        self.verdict = bundle["verdict"]
        self.graph = self.verdict["graph"]

    @property
    def state(self) -> str:
        return str(self.verdict["state"])

    @property
    def edges(self) -> Set[Tuple[str, str, str]]:
        return {(e["src"], e["dst"], e.get("kind", "peer")) for e in self.graph["edges"]}

    @property
    def ends(self) -> List[str]:
        return list(self.graph["ends"])

    def why(self) -> str:
        return json.dumps(
            {"edges": sorted(self.edges), "chains": self.graph["chains"], "ends": self.ends},
            ensure_ascii=False,
            indent=1,
        )


def key(pid: int) -> str:
    return f"/{pid}"


def capture(
    argv: Sequence[str], tmp_path: Path, flags: Sequence[str] = QUICK, ready_s: float = 30.0
) -> Captured:
    started = start_ready(argv, timeout_s=ready_s)
    try:
        out = tmp_path / "bundle.json"
        done = run_diag(["capture", "--pid", str(started.pid), *flags, "-o", str(out)])
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    return Captured(started.pid, started.lines[-1], json.loads(out.read_text()))


def program(code: str, tmp_path: Path) -> Captured:
    return capture([sys.executable, "-c", code], tmp_path)


def test_lock_order_cycle_between_two_threads(tmp_path: Path) -> None:
    c = capture([sys.executable, str(SCENARIOS / "lock_order.py")], tmp_path)
    me = key(c.pid)
    assert c.edges == {(me, me, "lock")}, c.why()
    assert c.ends == [me], c.why()
    (chain,) = c.graph["chains"]
    assert "2 thread(s) blocked on 2 lock(s) (a lock cycle)" in chain, c.why()
    assert "only its own threads can release the lock" in chain
    assert c.state == "deadlocked"


def test_only_thread_acquires_its_lock_twice(tmp_path: Path) -> None:
    c = program(SELF_LOCK, tmp_path)
    me = key(c.pid)
    assert c.edges == {(me, me, "lock")}, c.why()
    assert c.ends == [me], c.why()
    (chain,) = c.graph["chains"]
    assert "1 thread(s) blocked on 1 lock(s)" in chain and "a lock cycle" not in chain
    assert "only its own threads can release the lock" in chain, c.why()
    assert c.state == "deadlocked"


def test_pipe_read_ends_at_the_writer_child(tmp_path: Path) -> None:
    c = program(PIPE, tmp_path)
    me, (child,) = key(c.pid), c.others
    assert (me, key(child), "pipe") in c.edges, c.why()
    assert (key(child), "outside:timer", "outside") in c.edges, c.why()
    assert c.ends == [key(child)], c.why()
    assert any(
        re.match(rf"pid {c.pid} \S+ → \(pipe\) → pid {child}\b", ch) for ch in c.graph["chains"]
    ), c.graph["chains"]


def test_fifo_open_nobody_writes_waits_on_the_outside(tmp_path: Path) -> None:
    c = program(FIFO_OPEN, tmp_path)
    me = key(c.pid)
    assert c.edges == {(me, "outside:peer", "outside")}, c.why()
    assert c.ends == [me], c.why()
    assert "waits on the outside: unknown peer" in c.graph["chains"][0], c.why()
    assert c.state == "deadlocked"


def test_fifo_read_ends_at_the_sibling_writer(tmp_path: Path) -> None:
    c = program(FIFO_SIBLINGS, tmp_path)
    reader, writer = c.others
    assert (key(reader), key(writer), "pipe") in c.edges, c.why()
    # Today's guess: the reader's parent (the launcher) holds the write end.
    assert (key(reader), key(c.pid), "pipe") not in c.edges, c.why()


def test_unix_socket_recv_ends_at_the_server(tmp_path: Path) -> None:
    c = program(UNIX, tmp_path)
    me, (server,) = key(c.pid), c.others
    assert any(s == me and d == key(server) for s, d, _ in c.edges), c.why()
    assert c.ends == [key(server)], c.why()


@pytest.mark.parametrize("stop", [True, False], ids=["stopped", "sleeping"])
def test_fifo_writer_outside_the_job_is_the_chain_end(tmp_path: Path, stop: bool) -> None:
    fifo = str(tmp_path / "f")
    os.mkfifo(fifo)
    code = "import sys, time; f = open(sys.argv[1], 'wb'); time.sleep(10**6)"
    writer = subprocess.Popen([sys.executable, "-c", code, fifo])  # not the job's child
    try:
        started = start_ready([sys.executable, "-c", FIFO_OUTSIDE, fifo], timeout_s=30)
        if stop:
            os.kill(writer.pid, signal.SIGSTOP)
        try:
            out = tmp_path / "bundle.json"
            done = run_diag(["capture", "--pid", str(started.pid), *QUICK, "-o", str(out)])
        finally:
            started.stop()
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode == 0, done.stderr
    bundle = json.loads(out.read_text())
    c = Captured(started.pid, "READY", bundle)
    me, them = key(c.pid), key(writer.pid)
    assert (me, them, "pipe") in c.edges, c.why()
    node = next(n for n in c.graph["nodes"] if n["node"] == them)
    assert node["label"].endswith("(outside the job)"), node
    assert node["state"] == ("stopped" if stop else "sleeping"), node
    assert c.ends == [them], c.why()
    assert c.graph["reasons"] == ["stopped" if stop else "outside"], c.why()
    holders = {h["pid"]: h for s in bundle["samples"] for h in s.get("fd_holders", [])}
    assert holders[writer.pid]["mode"] == "w" and holders[writer.pid]["kind"] == "fifo"
    evidence = next(e["evidence"] for e in c.graph["edges"] if e["dst"] == them)
    assert "reads fd" in evidence and "holds its write end" in evidence, evidence
    if stop:
        assert any(f"kill -CONT {writer.pid}" in ch for ch in c.graph["chains"]), c.why()


def test_pipe_write_full_ends_at_the_sibling_reader(tmp_path: Path) -> None:
    c = program(PIPE_FULL_SIBLINGS, tmp_path)
    writer, reader = c.others
    assert (key(writer), key(reader), "pipe") in c.edges, c.why()
    assert (key(writer), key(c.pid), "pipe") not in c.edges, c.why()  # the old guess: parent
    evidence = next(e["evidence"] for e in c.graph["edges"] if e["src"] == key(writer))
    assert "writes fd" in evidence and "holds its read end" in evidence, evidence


def test_local_tcp_recv_without_a_request_ends_at_the_peer(tmp_path: Path) -> None:
    c = program(TCP_SILENT, tmp_path)
    me, (server,) = key(c.pid), c.others
    assert (me, key(server), "tcp") in c.edges, c.why()
    assert c.ends == [key(server)], c.why()


def test_tcp_recv_from_a_server_outside_the_job_waits_on_that_peer(tmp_path: Path) -> None:
    """A client blocked on a server the capture does not hold: only that server's answer ends
    the read (a peer outside the capture), not a request that may come in from the network."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        c = capture([sys.executable, "-c", TCP_OUTSIDE, str(port)], tmp_path)
    finally:
        listener.close()
    me = key(c.pid)
    # The server is this test's process: found by its listener's inode (the connection was
    # never accepted), a node of its own outside the job.
    (edge,) = [e for e in c.graph["edges"] if e["src"] == me]
    assert (edge["dst"], edge["kind"]) == (key(os.getpid()), "tcp"), c.why()
    assert f"127.0.0.1:{port}" in edge["evidence"], edge
    node = next(n for n in c.graph["nodes"] if n["node"] == key(os.getpid()))
    assert node["label"].endswith("(outside the job)"), node


# A local server outside the job (the test starts it), stopped: the job's client - its main
# thread, or a pool thread while the main thread waits on the future, or a threaded front
# end's handler while clients wait - waits on it.
TCP_CLIENT = r"""
import socket, sys, threading
from concurrent.futures import ThreadPoolExecutor
def call():
    c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    c.sendall(b"GET / HTTP/1.0\r\n\r\n")
    return c.recv(100)
threading.Timer(0.5, lambda: print("READY", flush=True)).start()
if sys.argv[2] == "main":
    call()
else:
    with ThreadPoolExecutor(2) as pool:
        pool.submit(call).result()
"""

FRONT_END = r"""
import http.server, socket, sys, threading
backend = int(sys.argv[1])
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        c = socket.create_connection(("127.0.0.1", backend))
        c.sendall(b"GET / HTTP/1.0\r\n\r\n")
        body = c.recv(100)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
port = server.server_address[1]
def clients():
    for _ in range(2):
        threading.Thread(target=lambda: socket.create_connection(("127.0.0.1", port)).sendall(
            b"GET / HTTP/1.0\r\n\r\n"), daemon=True).start()
threading.Timer(0.2, clients).start()
threading.Timer(3.0, lambda: print("READY", flush=True)).start()
server.serve_forever()
"""


@pytest.fixture
def stopped_server() -> Any:
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket, time\ns = socket.socket()\n"
            "s.bind(('127.0.0.1', 0)); s.listen(); print(s.getsockname()[1], flush=True)\n"
            "time.sleep(10**6)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    port = int(server.stdout.readline())
    os.kill(server.pid, signal.SIGSTOP)
    yield server, port
    server.kill()
    server.wait()


@pytest.mark.parametrize("where", ["main", "pool"])
def test_tcp_client_of_a_stopped_server_outside_the_job(
    tmp_path: Path, stopped_server: Any, where: str
) -> None:
    server, port = stopped_server
    c = capture([sys.executable, "-c", TCP_CLIENT, str(port), where], tmp_path)
    me, them = key(c.pid), key(server.pid)
    evidence = [e["evidence"] for e in c.graph["edges"] if (e["src"], e["dst"]) == (me, them)]
    assert evidence, c.why()
    assert ("its thread ThreadPoolExecutor" in evidence[0]) == (where == "pool"), evidence
    assert (c.verdict["rule"], c.state) == ("waits_on_stopped_outsider", "deadlocked"), c.why()
    assert [s["pid"] for s in c.verdict["suspects"]] == [server.pid]
    # the wording is the feature: the command that resumes the stopped server
    assert f"kill -CONT {server.pid}" in c.verdict["summary"], c.verdict["summary"]


def test_front_end_handlers_wait_on_a_stopped_backend_outside_the_job(
    tmp_path: Path, stopped_server: Any
) -> None:
    server, port = stopped_server
    c = capture([sys.executable, "-c", FRONT_END, str(port)], tmp_path)
    me, them = key(c.pid), key(server.pid)
    assert ("outside:clients", me, "request") in c.edges, c.why()
    assert (me, them, "tcp") in c.edges, c.why()
    assert (c.verdict["rule"], c.state) == ("waits_on_stopped_outsider", "deadlocked"), c.why()
    assert [s["pid"] for s in c.verdict["suspects"]] == [server.pid]


def test_local_tcp_recv_ends_at_the_server_holding_the_request(tmp_path: Path) -> None:
    c = program(TCP, tmp_path)
    me, (server,) = key(c.pid), c.others
    assert (me, key(server), "request") in c.edges, c.why()
    assert not any(s == me and d.startswith("outside:") for s, d, _ in c.edges), c.why()
    assert c.ends == [key(server)], c.why()
    assert any(" → (request) → " in ch for ch in c.graph["chains"]), c.why()


def test_popen_wait_ends_at_the_child(tmp_path: Path) -> None:
    c = program(CHILD, tmp_path)
    me, (child,) = key(c.pid), c.others
    assert (me, key(child), "child") in c.edges, c.why()
    assert c.ends == [key(child)], c.why()
    assert any("sleeping in" in ch and "timer" in ch for ch in c.graph["chains"]), c.why()


def test_stdin_piped_from_the_waiting_parent_is_a_cycle(tmp_path: Path) -> None:
    c = program(STDIN_FROM_PARENT, tmp_path)
    me, (child,) = key(c.pid), c.others
    assert (me, key(child), "child") in c.edges, c.why()
    assert (key(child), me, "pipe") in c.edges, c.why()
    assert "outside:stdin" not in {e[1] for e in c.edges}, c.why()
    assert (c.verdict["rule"], c.state) == ("chains_never_end", "deadlocked"), c.verdict["summary"]
    assert c.graph["reasons"] == ["cycle"], c.why()
    assert {s["pid"] for s in c.verdict["suspects"]} == {c.pid, child}


def test_stdin_forwarded_by_a_launcher_thread_is_a_door(tmp_path: Path) -> None:
    """Its parent holds the child's stdin, but a thread of the parent reads the terminal (here
    a pipe that stays open) to forward it: not a cycle."""
    c = program(STDIN_FORWARDED, tmp_path)
    assert (c.verdict["rule"], c.state) == ("waits_for_outside", "idle"), c.verdict["summary"]
    assert "outside:stdin" in {e[1] for e in c.edges}, c.why()


def test_stdin_piped_from_outside_the_job_is_a_door(tmp_path: Path) -> None:
    """The job (the reader, captured alone by its PID) reads a pipe a process outside it
    writes: input that can still come, so idle - not a deadlock."""
    started = start_ready([sys.executable, "-c", STDIN_FROM_OUTSIDE], timeout_s=30)
    job, feeder = (int(x) for x in started.lines[-1].split()[1:3])
    try:
        out = tmp_path / "bundle.json"
        done = run_diag(["capture", "--pid", str(job), *QUICK, "-o", str(out)])
    finally:
        os.kill(feeder, signal.SIGKILL)
        started.stop()
    assert done.returncode == 0, done.stderr
    c = Captured(job, "READY", json.loads(out.read_text()))
    assert (key(job), "outside:stdin", "outside") in c.edges, c.why()
    assert (c.verdict["rule"], c.state) == ("waits_for_outside", "idle"), c.verdict["summary"]


def test_pipe_from_a_zombie_helper_ends_at_the_zombie(tmp_path: Path) -> None:
    c = program(ZOMBIE, tmp_path)
    me, (child,) = key(c.pid), c.others
    assert (me, key(child), "pipe") in c.edges, c.why()
    node = next(n for n in c.graph["nodes"] if n["node"] == key(child))
    assert node["state"] == "zombie", c.why()
    assert c.ends == [key(child)], c.why()
    assert any("zombie, exit code 0 - it will never answer" in ch for ch in c.graph["chains"])
    assert c.state == "deadlocked"


@pytest.mark.torch
@pytest.mark.skipif(not HAVE_TORCH, reason="torch not installed")
def test_gloo_group_ends_at_the_stopped_rank(tmp_path: Path) -> None:
    c = capture(
        [sys.executable, str(SCENARIOS / "torchrun_stopped_rank.py")], tmp_path, ready_s=180
    )
    ranks = {n["rank"]: n["node"] for n in c.graph["nodes"] if n.get("rank") is not None}
    assert set(ranks) == {0, 1, 2}, c.why()
    stopped = ranks[1]
    assert (ranks[0], stopped, "peer") in c.edges and (ranks[2], stopped, "peer") in c.edges
    assert not any(s == stopped for s, _, _ in c.edges), c.why()  # a stopped rank waits on nobody
    assert c.ends == [stopped], c.why()
    assert any("→ (peer) → rank 1: stopped" in ch for ch in c.graph["chains"]), c.why()
    assert c.state == "deadlocked"


# Other Pythons ---------------------------------------------------------------------------


def _python(version: str) -> Optional[str]:
    found = sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python{version}"))
    return found[-1] if found else None


_spec = importlib.util.spec_from_file_location(
    "run_scenarios", SCENARIOS.parent / "run_scenarios.py"
)
assert _spec is not None and _spec.loader is not None
run_scenarios = sys.modules.get("run_scenarios") or importlib.util.module_from_spec(_spec)
if "run_scenarios" not in sys.modules:
    sys.modules["run_scenarios"] = run_scenarios
    _spec.loader.exec_module(run_scenarios)
_BY_NAME = {s.name: s for s in run_scenarios.SCENARIOS}


# Wrong under that Python today (the verdict's, not the graph's): expected to fail until fixed.
# Verdicts still wrong under one Python: (version, scenario) -> what is wrong.
WRONG_UNDER: Dict[Tuple[str, str], str] = {}


def _other_pythons() -> Any:
    out = []
    for version, reader in (("3.10", "py-spy"), ("3.13", "diag")):
        exe = _python(version)
        for name in ("lock_order", "pipe_deadlock", "http_idle"):
            marks = [pytest.mark.skipif(exe is None, reason=f"Python {version} not installed")]
            if (version, name) in WRONG_UNDER:
                marks.append(pytest.mark.xfail(strict=False, reason=WRONG_UNDER[version, name]))
            out.append(pytest.param(exe, reader, name, id=f"{version}-{name}", marks=marks))
    return out


@pytest.mark.parametrize(("exe", "reader", "name"), _other_pythons())
def test_scenario_verdict_under_other_pythons(
    exe: str, reader: str, name: str, tmp_path: Path
) -> None:
    scenario = _BY_NAME[name]
    started = start_ready([exe, str(SCENARIOS / f"{name}.py")], timeout_s=60)
    try:
        out = tmp_path / "bundle.json"
        done = run_diag(["capture", "--pid", str(started.pid), *QUICK, "-o", str(out)])
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    bundle = json.loads(out.read_text())
    verdict = bundle["verdict"]
    assert scenario.accepts(verdict["state"]), verdict["summary"]
    readers = {
        ps.get("stack_reader")
        for s in bundle["samples"]
        for ps in s["processes"]
        if ps["pid"] == started.pid
    }
    assert readers == {reader}, readers


# Rank 0 runs a Python build step (a child that computes) while ranks 1-2 poll for its lock
# file: the work is in a Python child, which no rule used to credit - "idle, nothing moves".
PYTHON_CHILD_BUILDS = r"""
import multiprocessing as mp, os, subprocess, sys, tempfile, time
LOCK = os.path.join(tempfile.mkdtemp(prefix="diag-build-"), "lock")

def rank(r, go):
    if r == 0:
        open(LOCK, "w").close()
        go.set()
        subprocess.run([sys.executable, "-c", "import sys\nwhile True: sum(range(1000))"])
        os.remove(LOCK)
    else:
        go.wait()
        while os.path.exists(LOCK):  # as torch's FileBaton.wait does
            time.sleep(0.1)

if __name__ == "__main__":
    go = mp.Event()
    ps = [mp.Process(target=rank, args=(r, go)) for r in range(3)]
    [p.start() for p in ps]
    go.wait()
    time.sleep(0.5)
    print("READY", flush=True)
    [p.join() for p in ps]
"""


def test_rank_waiting_on_a_python_child_that_computes_is_slow(tmp_path: Path) -> None:
    c = program(PYTHON_CHILD_BUILDS, tmp_path)
    verdict = c.verdict
    assert (verdict["rule"], verdict["state"]) == ("children_work", "slow"), verdict["summary"]
    assert [s["rank"] for s in verdict["suspects"]] == [0], verdict["suspects"]
    assert "don't kill" in verdict["summary"]  # the wording is the feature: wait, don't kill


# Two ranks wait on torch's build lock that a killed build left behind (the lock file exists,
# no process has it open): never goes on by itself, and killing the job would not help.
STALE_BATON = r"""
import multiprocessing as mp, os, sys, tempfile, time
from torch.utils.file_baton import FileBaton
LOCK = os.path.join(tempfile.mkdtemp(prefix="diag-ext-"), "lock")

def rank(r, there):
    baton = FileBaton(LOCK)
    if not baton.try_acquire():
        there.wait()
        baton.wait()

if __name__ == "__main__":
    open(LOCK, "w").close()  # left by a build that was killed
    there = mp.Barrier(3)
    ps = [mp.Process(target=rank, args=(r, there)) for r in range(2)]
    [p.start() for p in ps]
    there.wait()
    time.sleep(0.3)
    print("READY", flush=True)
    [p.join() for p in ps]
"""


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (make install adds it)")
def test_ranks_polling_a_stale_torch_build_lock_are_deadlocked(tmp_path: Path) -> None:
    verdict = capture([sys.executable, "-c", STALE_BATON], tmp_path, ready_s=60).verdict
    assert (verdict["rule"], verdict["state"]) == ("polls_for_stale_lock_file", "deadlocked")
    assert [s["rank"] for s in verdict["suspects"]] == [0, 1], verdict["summary"]
    # the wording is the feature: what to do, and that killing the job would not help
    assert "delete that `lock` file" in verdict["summary"]
    assert "killing it would not help" in verdict["summary"]


# Two ranks (RANK in their environment) each wait for a batch their DataLoader worker computes
# in pure Python; every batch after the first takes longer than the capture.
SLOW_DATALOADER_RANK = r"""
import sys, torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self): return 10**6
    def __getitem__(self, i):
        s = 0
        for k in range(10 if i == 0 else 10**10): s += k
        return torch.tensor([float(s % 7)])

for n, batch in enumerate(DataLoader(Slow(), batch_size=1, num_workers=1)):
    open(sys.argv[1], "w").close()
"""

SLOW_DATALOADER = r"""
import os, subprocess, sys, tempfile, time
marks = tempfile.mkdtemp(prefix="diag-dl-")
procs = [subprocess.Popen([sys.executable, "-c", sys.argv[1], os.path.join(marks, str(r))],
         env=dict(os.environ, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r))) for r in range(2)]
while len(os.listdir(marks)) < 2:
    time.sleep(0.1)
time.sleep(0.5)
print("READY", flush=True)
[p.wait() for p in procs]
"""


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (make install adds it)")
def test_ranks_waiting_on_dataloader_workers_that_compute_are_slow(tmp_path: Path) -> None:
    """Each rank's main thread waits in the DataLoader's queue; its worker (a Python child
    with the rank's RANK) computes the batch: slow - not 'idle, wakes on a timer'."""
    c = capture([sys.executable, "-c", SLOW_DATALOADER, SLOW_DATALOADER_RANK], tmp_path, ready_s=90)
    assert (c.verdict["rule"], c.state) == ("children_work", "slow"), c.verdict["summary"]
    assert {s["rank"] for s in c.verdict["suspects"]} == {0, 1}


# The main thread calls its own HTTP server, which a thread of its own serves; the handler is
# slow (a long sleep), so the main thread waits in a read for an answer that will come.
SELF_CALL_SERVED_BY_A_THREAD = r"""
import http.server, threading, time, urllib.request

class Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("READY", flush=True)
        time.sleep(10**6)

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
threading.Thread(target=server.serve_forever, daemon=True).start()
urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/").read()
"""


def test_a_call_to_its_own_port_served_by_another_thread_is_no_self_wait(tmp_path: Path) -> None:
    """The contrast to the uvicorn_calls_itself scenario: here another thread accepts (its
    serve_forever loop) and a handler thread holds the request - no tcp self-edge, not
    'waits for its own server'."""
    c = program(SELF_CALL_SERVED_BY_A_THREAD, tmp_path)
    me = key(c.pid)
    assert (me, me, "tcp") not in c.edges, c.why()
    matched = {c.verdict["rule"], *(m["rule"] for m in c.verdict.get("also_matched", []))}
    assert "calls_itself" not in matched, c.verdict["summary"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (make install adds it)")
def test_torchrun_waiting_for_the_other_node_to_join_is_idle_not_a_deadlock(
    tmp_path: Path,
) -> None:
    """A real torchrun of two nodes of which only this one was started: its agent waits in
    the c10d rendezvous (no rank started). Not 'deadlocked - kill the job': the other node
    ends that wait, and diag names the settings it must join with."""
    port = _free_port()
    script = tmp_path / "train.py"
    script.write_text("import torch.distributed as dist\ndist.init_process_group('gloo')\n")
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    agent = subprocess.Popen(
        [torchrun, "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
         f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=diagtest", str(script)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        for _ in range(600):  # the readiness handshake: its c10d store accepts
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(1.0)  # from the store into the join's wait
        out = tmp_path / "bundle.json"
        done = run_diag(["capture", "--pid", str(agent.pid), *QUICK, "-o", str(out)])
    finally:
        os.killpg(agent.pid, signal.SIGKILL)
        agent.wait()
    assert done.returncode == 0, done.stderr
    verdict = json.loads(out.read_text())["verdict"]
    assert (verdict["rule"], verdict["state"]) == ("waits_for_nodes_to_join", "idle"), verdict
    assert not verdict.get("suspects"), verdict["summary"]
    summary = verdict["summary"]
    # the wording is the feature: the settings the other node must join with, and the advice
    assert f"--nnodes=2, c10d, at 127.0.0.1:{port}, id diagtest" in summary
    assert "killing it does not help" in summary


# "Start the helper in the background" through run(capture_output=True): sh exits at once,
# but the backgrounded sleep inherited sh's stdout - the parent waits on it for EOF.
BACKGROUND_HOLDS_THE_PIPE = r"""
import os, subprocess, threading
threading.Timer(1.0, lambda: print("READY", flush=True)).start()
subprocess.run("sleep 100000 &", shell=True, capture_output=True)
"""


def test_communicate_waiting_on_a_background_grandchild_names_it(tmp_path: Path) -> None:
    c = program(BACKGROUND_HOLDS_THE_PIPE, tmp_path)
    summary = c.verdict["summary"]
    assert (c.verdict["rule"], c.state) == ("pipe_outlives_child", "deadlocked"), summary
    (suspect,) = c.verdict["suspects"]
    assert f"Kill pid {suspect['pid']}" in summary  # the wording is the feature: the remedy
    assert any(e[2] == "pipe" and e[1] == key(suspect["pid"]) for e in c.edges), c.why()
