"""Pipe, fifo and socket ends matched by inode (``diag.probes.fd_ends``): the parsers on
recorded text, then real processes (a pipe, fifo siblings, a socketpair, a local TCP
connection) and the bounds of the host scan for holders outside the job."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from diag.model import Bundle, FdEnd, ThreadSample
from diag.probes import fd_ends as fe
from diag.probes import fd_holders as fh
from diag.probes.fd_ends import (
    FdLinks,
    JobFds,
    blocked_fds,
    job_fd_ends,
    other_modes,
    parse_fdinfo,
    parse_link,
    parse_proc_net_unix,
    read_fd_links,
)
from diag.probes.fd_holders import HolderCache, Wanted, scan_holders, unmatched_waits
from diag.probes.procfs import ProcFS
from diag.probes.sock_diag import (
    SOCK_DIAG_BY_FAMILY,
    UNIX_DIAG_NAME,
    UNIX_DIAG_PEER,
    parse_unix_dump,
    unix_peers,
)
from diag.probes.sockets import socket_views
from diag.probes.threads import parse_syscall, read_threads

# Recorded text ---------------------------------------------------------------------------

FDINFO_PIPE_W = "pos:\t0\nflags:\t01\nmnt_id:\t15\nino:\t1322537\n"
FDINFO_FIFO_R_NONBLOCK = "pos:\t0\nflags:\t0104000\nmnt_id:\t29\nino:\t2154972\n"
FDINFO_RDWR_OLD_KERNEL = "pos:\t0\nflags:\t02000002\nmnt_id:\t9\n"  # no ino: before 5.14
PROC_NET_UNIX = (
    "Num       RefCount Protocol Flags    Type St Inode Path\n"
    "0000000000000000: 00000002 00000000 00010000 0001 01 23456 /run/systemd/notify\n"
    "0000000000000000: 00000003 00000000 00000000 0001 03 1322541\n"
    "0000000000000000: 00000003 00000000 00000000 0001 03 1322540 @/tmp/.X11-unix/X0\n"
)


def test_links_name_pipes_and_sockets_only() -> None:
    assert parse_link("pipe:[1322537]") == ("pipe", 1322537)
    assert parse_link("socket:[77]") == ("socket", 77)
    for other in ("/tmp/f", "anon_inode:[eventfd]", "net:[4026531840]", "pipe:[x]", "socket:["):
        assert parse_link(other) is None


def test_fdinfo_mode_and_inode() -> None:
    assert parse_fdinfo(FDINFO_PIPE_W) == ("w", 1322537)
    assert parse_fdinfo(FDINFO_FIFO_R_NONBLOCK) == ("r", 2154972)  # O_NONBLOCK is not the mode
    assert parse_fdinfo(FDINFO_RDWR_OLD_KERNEL) == ("rw", None)
    assert parse_fdinfo("garbage") == ("?", None)
    assert parse_fdinfo("flags:\tzz\n") == ("?", None)


def test_other_modes() -> None:
    assert other_modes("r") == ("w", "rw", "?")
    assert other_modes("w") == ("r", "rw", "?")
    assert "r" in other_modes("rw") and "w" in other_modes("?")


def test_proc_net_unix_inodes() -> None:
    assert parse_proc_net_unix(PROC_NET_UNIX) == {23456, 1322541, 1322540}
    assert parse_proc_net_unix("") == set()


def test_syscall_fd_of_socket_calls() -> None:
    assert parse_syscall("45 0x7 0x7f00 0x64 0x0 0x0 0x0 0x7ffd 0x7f01").fd == 7  # recvfrom
    assert parse_syscall("47 0x5 0x7f00 0x0 0x0 0x0 0x0 0x7ffd 0x7f01").fd == 5  # recvmsg
    assert parse_syscall("44 0x9 0x7f00 0x64 0x0 0x0 0x0 0x7ffd 0x7f01").syscall == "sendto"
    assert parse_syscall("42 0x4 0x7f00 0x10 0x0 0x0 0x0 0x7ffd 0x7f01").fd == 4  # connect
    assert parse_syscall("207 0x3 0x0 0x0 0x0 0x0 0x0 0x0 0x0", "aarch64").fd == 3
    assert parse_syscall("202 0x3 0x7f00 0x0 0x0 0x0 0x0 0x7ffd 0x7f01").fd is None  # futex


def _unix_msg(inode: int, peer: int, name: bytes, seq: int = 1) -> bytes:
    attrs = b""
    if peer:
        attrs += struct.pack("=HHI", 8, UNIX_DIAG_PEER, peer)
    if name:
        alen = 4 + len(name)
        attrs += struct.pack("=HH", alen, UNIX_DIAG_NAME) + name + b"\0" * ((-alen) % 4)
    body = struct.pack("=BBBBI8s", socket.AF_UNIX, 1, 1, 0, inode, b"\0" * 8) + attrs
    return struct.pack("=IHHII", 16 + len(body), SOCK_DIAG_BY_FAMILY, 2, seq, 0) + body


def test_unix_dump_parser_peer_and_names() -> None:
    done = struct.pack("=IHHII", 20, 3, 2, 1, 0) + b"\0" * 4
    data = _unix_msg(10, 11, b"/run/x.sock") + _unix_msg(11, 10, b"") + _unix_msg(12, 0, b"\0ab")
    into: Dict[int, object] = {}
    assert parse_unix_dump(data, into) is False  # type: ignore[arg-type]
    assert parse_unix_dump(done, into) is True  # type: ignore[arg-type]
    assert into == {10: (11, "/run/x.sock"), 11: (10, ""), 12: (None, "@ab")}
    with pytest.raises(ValueError):
        parse_unix_dump(struct.pack("=I", 999) + data[4:40], {})  # a length past the data


def _end(fd: int, kind: str, inode: int, mode: str = "?", peer: object = None) -> FdEnd:
    return FdEnd(fd=fd, kind=kind, inode=inode, mode=mode, peer_inode=peer)  # type: ignore[arg-type]


def test_unmatched_waits_pure() -> None:
    ends = {
        1: (_end(3, "pipe", 100, "r"), _end(4, "pipe", 200, "r"), _end(5, "unix", 300, "rw", 301)),
        2: (_end(7, "pipe", 200, "w"),),  # pid 2 writes pipe 200: matched in the job
        3: (_end(3, "pipe", 400, "r"), _end(4, "pipe", 400, "w")),  # holds both ends itself
    }
    blocked = {1: [3, 4, 5], 3: [3]}
    wanted = unmatched_waits(ends, blocked)
    assert {(w.inode, w.kind) for w in wanted} == {(100, "pipe"), (301, "unix")}
    # A peer socket a job process holds (even one not recorded as an end) is matched.
    assert {w.inode for w in unmatched_waits(ends, blocked, {2: ["socket:[301]"]})} == {100}


def test_select_ends_cap_blocked_first() -> None:
    cands = [fe._Cand(1, fd, "pipe", fd) for fd in range(10, 20)] + [fe._Cand(0, 99, "pipe", 1)]
    chosen, more = fe.select_ends(cands, cap=4)
    assert [c.fd for c in chosen] == [99, 10, 11, 12] and more == 7


# Real processes ---------------------------------------------------------------------------

PROCFS = ProcFS()


def _wait_wchan(pid: int, *parts: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/wchan") as fh:
                if any(p in fh.read() for p in parts):
                    return
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} never waited in {parts}")


def _job(pids: List[int]) -> Dict[int, JobFds]:
    views = socket_views(PROCFS, pids)
    return {
        pid: JobFds(read_threads(PROCFS, pid, "x86_64"), views[pid].links, views[pid].tcp, True)
        for pid in pids
    }


@pytest.fixture
def procs() -> Iterator[List[subprocess.Popen[bytes]]]:
    started: List[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def _py(procs: List[subprocess.Popen[bytes]], code: str, *args: str, **kw: object) -> int:
    p = subprocess.Popen([sys.executable, "-c", code, *args], **kw)  # type: ignore[call-overload]
    procs.append(p)
    return int(p.pid)


needs_x86 = pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers")


@needs_x86
def test_pipe_read_end_of_a_reader_and_its_writer(procs: List[subprocess.Popen[bytes]]) -> None:
    r, w = os.pipe()
    try:
        code = "import os, sys; os.read(int(sys.argv[1]), 1)"
        reader = _py(procs, code, str(r), stdin=subprocess.DEVNULL, pass_fds=(r,))
        writer = _py(procs, "import time; time.sleep(100)", pass_fds=(w,))
        inode = os.fstat(r).st_ino
        _wait_wchan(reader, "pipe")
        ends = job_fd_ends(PROCFS, _job([reader, writer]))
    finally:
        os.close(r)
        os.close(w)
    mine, more = ends[reader]
    assert mine[0] == FdEnd(fd=r, kind="pipe", inode=inode, mode="r") and more == 0
    theirs = [e for e in ends[writer][0] if e.inode == inode]
    assert [(e.fd, e.mode) for e in theirs] == [(w, "w")]


@needs_x86
def test_fifo_siblings_share_the_inode(
    tmp_path: Path, procs: List[subprocess.Popen[bytes]]
) -> None:
    fifo = str(tmp_path / "f")
    os.mkfifo(fifo)
    reader = _py(procs, "import sys; open(sys.argv[1], 'rb').read(1)", fifo)
    writer = _py(procs, "import sys, time; f = open(sys.argv[1], 'wb'); time.sleep(100)", fifo)
    _wait_wchan(reader, "pipe_read")
    ends = job_fd_ends(PROCFS, _job([reader, writer]))
    inode = os.stat(fifo).st_ino
    (r,) = [e for e in ends[reader][0] if e.kind == "fifo"]
    (w,) = [e for e in ends[writer][0] if e.kind == "fifo"]
    assert (r.inode, r.mode, r.path) == (inode, "r", fifo)
    assert (w.inode, w.mode, w.path) == (inode, "w", fifo)
    assert ends[reader][0][0] == r  # the blocked fd first


@needs_x86
def test_socketpair_recv_names_its_peer(procs: List[subprocess.Popen[bytes]]) -> None:
    a, b = socket.socketpair()
    try:
        code = "import socket, sys; socket.socket(fileno=int(sys.argv[1])).recv(1)"
        blocked = _py(procs, code, str(a.fileno()), pass_fds=(a.fileno(),))
        fd = a.fileno()
        holder = _py(procs, "import time; time.sleep(100)", pass_fds=(b.fileno(),))
        ia, ib = os.fstat(a.fileno()).st_ino, os.fstat(b.fileno()).st_ino
        _wait_wchan(blocked, "unix")
        ends = job_fd_ends(PROCFS, _job([blocked, holder]))
    finally:
        a.close()
        b.close()
    first = ends[blocked][0][0]
    assert (first.fd, first.kind, first.inode, first.peer_inode) == (fd, "unix", ia, ib)
    assert any(e.kind == "unix" and e.inode == ib for e in ends[holder][0])
    assert unix_peers([ia, 999_999_999])[ia].peer_inode == ib  # an unknown inode: left out


@needs_x86
def test_local_tcp_ends_carry_both_addresses(procs: List[subprocess.Popen[bytes]]) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    code = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1]))).recv(1)"
    client = _py(procs, code, str(port))
    conn, peer = server.accept()
    try:
        _wait_wchan(client, "wait")
        ends = job_fd_ends(PROCFS, _job([client]))
    finally:
        conn.close()
        server.close()
    tcp = ends[client][0][0]
    assert tcp.kind == "tcp" and tcp.local == f"{peer[0]}:{peer[1]}"
    assert tcp.remote == f"127.0.0.1:{port}"


def test_the_cap_keeps_the_blocked_fd_and_counts_the_rest() -> None:
    pipes = [os.pipe() for _ in range(40)]
    try:
        me = os.getpid()
        links = read_fd_links(PROCFS, me)
        last_r = pipes[-1][0]
        t = ThreadSample(tid=me, name="x", state="S", syscall="read", syscall_fd=last_r)
        ends, more = job_fd_ends(PROCFS, {me: JobFds((t,), links, {}, True)}, cap=16)[me]
        assert len(ends) == 16 and more >= 80 - 16
        assert ends[0].fd == last_r and ends[0].mode == "r"
        capped = read_fd_links(PROCFS, me, max_fds=5)
        assert len(capped.links) <= 5 and capped.more >= 75
    finally:
        for r, w in pipes:
            os.close(r)
            os.close(w)


def test_blocked_fds_main_first_each_once() -> None:
    ts = [
        ThreadSample(tid=1, name="a", state="S", syscall_fd=5),
        ThreadSample(tid=2, name="b", state="S", syscall_fd=3),
        ThreadSample(tid=3, name="c", state="S", syscall_fd=5),
        ThreadSample(tid=4, name="d", state="S"),
    ]
    assert blocked_fds(ts) == [5, 3]


# Holders outside the job --------------------------------------------------------------------


def _pipe_held_outside(procs: List[subprocess.Popen[bytes]]) -> Tuple[int, int, int]:
    r, w = os.pipe()
    holder = _py(procs, "import time; time.sleep(100)", pass_fds=(w,))
    inode = os.fstat(r).st_ino
    os.close(w)
    time.sleep(0.2)
    return r, inode, holder


def test_scan_finds_the_writer_outside_the_job(procs: List[subprocess.Popen[bytes]]) -> None:
    r, inode, holder = _pipe_held_outside(procs)
    try:
        scan = scan_holders(PROCFS, [Wanted(inode, "pipe", other_modes("r"))], skip=[])
    finally:
        os.close(r)
    assert scan.note == ""
    (h,) = scan.holders
    assert (h.pid, h.inode, h.mode, h.kind) == (holder, inode, "w", "pipe")
    assert h.name.startswith("python") and h.state in ("S", "R")
    # Readers of the same pipe are no enders of a read: the test process held r, not listed.
    assert os.getpid() not in {x.pid for x in scan.holders}


def test_scan_budgets_record_the_overrun(procs: List[subprocess.Popen[bytes]]) -> None:
    r, inode, _ = _pipe_held_outside(procs)
    try:
        wanted = [Wanted(inode, "pipe", other_modes("r"))]
        by_pids = scan_holders(PROCFS, wanted, pid_budget=1)
        by_time = scan_holders(PROCFS, wanted, time_budget_s=0.0)
    finally:
        os.close(r)
    assert "stopped after 1 of" in by_pids.note and "PID budget 1" in by_pids.note
    assert "time budget 0 ms" in by_time.note
    assert scan_holders(PROCFS, []).holders == ()


def test_holder_cache_checks_instead_of_rescanning(
    procs: List[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    r, inode, holder = _pipe_held_outside(procs)
    calls: List[int] = []
    real = fh.scan_holders

    def counting(*args: object, **kw: object) -> fh.HolderScan:
        calls.append(1)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(fh, "scan_holders", counting)
    cache = HolderCache()
    wanted = [Wanted(inode, "pipe", other_modes("r"))]
    try:
        first, _ = cache.holders(PROCFS, wanted)
        second, _ = cache.holders(PROCFS, wanted)
        assert [h.pid for h in first] == [holder] == [h.pid for h in second]
        assert len(calls) == 1
        os.kill(holder, 19)  # SIGSTOP: the cached holder's state is read again
        time.sleep(0.1)
        (stopped,) = cache.holders(PROCFS, wanted)[0]
        assert stopped.state == "T" and len(calls) == 1
        os.kill(holder, 18)
        procs[-1].kill()
        procs[-1].wait()
        assert cache.holders(PROCFS, wanted)[0] == () and len(calls) == 2  # gone: rescanned
    finally:
        os.close(r)


def test_fd_links_of_a_recorded_tree_without_fds(tmp_path: Path) -> None:
    assert read_fd_links(ProcFS(tmp_path), 1) == FdLinks()


# The graph on recorded ends (no live process) ----------------------------------------------


def _with_ends(bundle: Bundle, ends: Dict[int, Tuple[FdEnd, ...]]) -> Bundle:
    import msgspec

    samples = tuple(
        msgspec.structs.replace(
            s,
            processes=tuple(
                msgspec.structs.replace(ps, fd_ends=ends.get(ps.pid, ())) for ps in s.processes
            ),
        )
        for s in bundle.samples
    )
    return msgspec.structs.replace(bundle, samples=samples)


def test_graph_edges_from_recorded_ends() -> None:
    from series import Proc, build

    from diag.verdict.classify import classify

    read = dict(wchan="pipe_read", syscall="read", syscall_fd=5, role="process")
    recv = dict(wchan="sk_wait_data", syscall="recvfrom", syscall_fd=6, role="process")
    sleep = dict(wchan="hrtimer_nanosleep", syscall="clock_nanosleep", role="process")
    procs = [
        Proc(10, ppid=1, **sleep),  # type: ignore[arg-type]
        Proc(11, ppid=10, **read),  # type: ignore[arg-type]
        Proc(12, ppid=10, **sleep),  # type: ignore[arg-type]  # a sibling: holds the write end
        Proc(13, ppid=10, **recv),  # type: ignore[arg-type]
    ]
    ends = {
        11: (FdEnd(fd=5, kind="pipe", inode=900, mode="r"),),
        12: (FdEnd(fd=7, kind="pipe", inode=900, mode="w"),),
        13: (FdEnd(fd=6, kind="tcp", inode=5, local="10.0.0.1:40000", remote="10.9.9.9:29500"),),
    }
    graph = classify(_with_ends(build(procs), ends)).graph
    assert graph is not None
    edges = {(e.src, e.dst, e.kind): e.evidence for e in graph.edges}
    assert "reads fd 5 (pipe:[900]); pid 12 python holds its write end (fd 7)" in edges.get(
        ("/11", "/12", "pipe"), ""
    ), edges
    assert ("/11", "/10", "pipe") not in edges  # the old guess: the parent
    network = edges.get(("/13", "outside:peer", "outside"), "")
    assert "10.9.9.9:29500" in network, edges
    # Without the ends (an older bundle) the old guess applies again.
    old = classify(build(procs)).graph
    assert old is not None and ("/11", "/10", "pipe") in {(e.src, e.dst, e.kind) for e in old.edges}


def test_a_server_with_unanswered_requests_waits_on_its_backend_over_a_unix_socket() -> None:
    """vLLM's shape: clients wait on the API server (requests unanswered the whole capture);
    its event loop sits in epoll, and it talks to the EngineCore over a unix socket - the
    EngineCore is stopped. The chain goes on from the server to the stopped backend."""
    from series import SELECTORS, Proc, build

    from diag.model import ServedConn
    from diag.verdict.classify import classify

    pending = tuple(
        ServedConn(port=8000, inode=k, bytes_in=200, recv_age_ms=10_000, send_age_ms=10_000)
        for k in range(2)
    )
    server = Proc(
        30,
        role="process",
        stack=(
            ("select", SELECTORS),
            ("run_forever", "/usr/lib/python3.11/asyncio/base_events.py"),
        ),
        syscall="epoll_wait",
        wchan="do_epoll_wait",
        ports=(8000,),
        served=[pending] * 3,
    )
    engine = Proc(31, role="process", ppid=30, state="T", cmdline=("VLLM::EngineCore",))
    ends = {
        30: (FdEnd(fd=20, kind="unix", inode=700, peer_inode=701),),
        31: (FdEnd(fd=9, kind="unix", inode=701, peer_inode=700),),
    }
    verdict = classify(_with_ends(build([server, engine]), ends))
    assert (verdict.rule, verdict.state) == ("rank_stopped", "deadlocked"), verdict.summary
    assert [s.pid for s in verdict.suspects] == [31]
    assert verdict.graph is not None
    edges = {(e.src, e.dst, e.kind): e.evidence for e in verdict.graph.edges}
    assert "hands them to" in edges.get(("/30", "/31", "unix"), ""), edges
    assert any(
        c.startswith("outside: clients → (request) → pid 30")
        and "(unix) → EngineCore (pid 31)" in c
        for c in verdict.graph.chains
    ), verdict.graph.chains
    lead = next(s for s in verdict.suspects if s.pid == 31)
    assert "(unix) → EngineCore (pid 31)" in lead.chain, lead


def test_tcp_peer_inodes_reverse_tuple_then_listener() -> None:
    from diag.probes.sock_diag import TcpConn, TcpTable
    from diag.probes.sockets import tcp_peer_inodes

    def conn(local: str, remote: str) -> TcpConn:
        return TcpConn(
            local=local, local_port=int(local.rpartition(":")[2]), remote=remote, rqueue_bytes=0
        )

    table = TcpTable(
        listen={50: 8000, 51: 9000},
        conns={
            10: conn("127.0.0.1:40000", "127.0.0.1:8000"),  # accepted: 11 is its other end
            11: conn("127.0.0.1:8000", "127.0.0.1:40000"),
            12: conn("127.0.0.1:40001", "127.0.0.1:9000"),  # in 9000's accept queue
            13: conn("10.0.0.5:40002", "10.0.0.5:9000"),  # this host's own address
            14: conn("10.0.0.5:40003", "10.0.0.9:9000"),  # another host: no local peer
        },
    )
    assert tcp_peer_inodes(table, [10, 12, 13, 14, 99]) == {10: 11, 12: 51, 13: 51}
