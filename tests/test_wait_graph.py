"""The wait-for graph (#14): who waits on whom, and where each chain of waits ends.

Table-driven with ``series``'s builders (no processes), plus one real scenario program under
``diag capture``. The graph never changes the verdict; it says who can end each wait.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, List, Tuple

import msgspec
import pytest
from conftest import SCENARIOS, run_diag, start_ready
from series import SELECTORS, THREADING, TORCH, Proc, Thr, build

from diag.bundle.io import load_bundle
from diag.model import Bundle, ServedConn, WaitGraph
from diag.render.build import build_view
from diag.render.html import render_html
from diag.render.markdown import render_markdown
from diag.verdict.classify import classify

ALL_REDUCE = (("all_reduce", TORCH), ("train_step", "/job/train.py"), ("main", "/job/train.py"))
SLEEPING = (("rebuild_cache", "/job/train.py"), ("train_step", "/job/train.py"))
SUBPROCESS_WAIT = (("Popen._try_wait", "/usr/lib/python3.11/subprocess.py"), ("main", "/x/s.py"))
EN = "\u2013"  # rank ranges are written with an en dash
EVENT_LOOP = (("select", SELECTORS), ("_run_once", "/usr/lib/python3.11/asyncio/base_events.py"))


def _rank(r: int, **kw: object) -> Proc:
    base: dict = {"stack": ALL_REDUCE, "ppid": 10, "world_size": 4}  # type: ignore[type-arg]
    base.update(kw)
    return Proc(100 + r, rank=r, rank_source="env:RANK", **base)


def _graph(bundle: Bundle) -> WaitGraph:
    graph = classify(bundle).graph
    assert graph is not None
    return graph


def _edges(g: WaitGraph) -> List[Tuple[str, str, str]]:
    return [(e.src, e.dst, e.kind) for e in g.edges]


def _diverged_rank() -> Bundle:
    odd = _rank(2, stack=SLEEPING, wchan="hrtimer_nanosleep", syscall="clock_nanosleep")
    return build([_rank(0), _rank(1), odd, _rank(3)])


def _stopped_rank() -> Bundle:
    return build([_rank(0), _rank(1), _rank(2, state="T"), _rank(3)])


def _waitpid_on_compiler() -> Bundle:
    parent = Proc(10, role="process", stack=SUBPROCESS_WAIT, wchan="do_wait", syscall="wait4")
    child = Proc(
        12,
        ppid=10,
        role="helper",
        cmdline=("cc1plus", "-O2"),
        python=False,
        cpu_pct=95.0,
        state="R",
        wchan=None,
        syscall="running",
    )
    return build([parent, child])


def _lock_cycle() -> Bundle:
    lock_stack = (("acquire", THREADING), ("transfer", "/x/l.py"))
    threads = [Thr(k, stack=lock_stack, futex_addr=f"0x5{k}0") for k in (1, 2)]
    join = (("_wait_for_tstate_lock", THREADING), ("join", THREADING), ("main", "/x/l.py"))
    return build([Proc(20, role="process", stack=join, threads=threads)])


def _server_with_stale_requests() -> Bundle:
    pending = tuple(
        ServedConn(port=8000, inode=k, bytes_in=200, recv_age_ms=10_000, send_age_ms=10_000)
        for k in range(4)
    )
    server = Proc(
        30,
        role="process",
        stack=EVENT_LOOP,
        syscall="epoll_wait",
        wchan="do_epoll_wait",
        ports=(8000,),
        served=[pending] * 3,
    )
    return build([server])


Case = Tuple[Callable[[], Bundle], List[Tuple[str, str, str]], str, List[str]]
CASES = {
    # ranks 0,1,3 in all_reduce, rank 2 elsewhere: they wait for rank 2 and only for it.
    "diverged-rank": (
        _diverged_rank,
        [("/100", "/102", "peer"), ("/101", "/102", "peer"), ("/103", "/102", "peer")],
        "/102",
        [f"ranks 0{EN}1, 3 → (peer) → rank 2: sleeping in `rebuild_cache`"],
    ),
    "stopped-rank": (
        _stopped_rank,
        [("/100", "/102", "peer"), ("/101", "/102", "peer"), ("/103", "/102", "peer")],
        "/102",
        [f"ranks 0{EN}1, 3 → (peer) → rank 2: stopped", "`kill -CONT 102`"],
    ),
    "waitpid-on-compiler": (
        _waitpid_on_compiler,
        [("/10", "/12", "child")],
        "/12",
        ["pid 10 python → (child) → pid 12 cc1plus: computing"],
    ),
    "lock-cycle": (
        _lock_cycle,
        [("/20", "/20", "lock")],
        "/20",
        ["2 thread(s) blocked on 2 lock(s) (a lock cycle)", "only its own threads"],
    ),
    "stale-requests": (
        _server_with_stale_requests,
        [("/30", "outside:network", "outside"), ("outside:clients", "/30", "request")],
        "/30",
        ["outside: clients → (request) → pid 30 python", "4 request(s) unanswered"],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_graph_edges_and_chain_end(name: str) -> None:
    make, edges, end, words = CASES[name]
    g = _graph(make())
    got = _edges(g)
    for edge in edges:
        assert edge in got, got
    assert end in g.ends, (g.ends, g.chains)
    text = "\n".join(g.chains)
    for w in words:
        assert w in text, text


def test_stopped_and_dead_nodes_have_no_way_forward() -> None:
    g = _graph(_stopped_rank())
    states = {n.key: n.state for n in g.nodes}
    assert states["/102"] == "stopped" and states["/100"] == "blocked"
    assert not [e for e in g.edges if e.src == "/102"]


def test_ranks_all_in_one_collective_wait_on_each_other() -> None:
    g = _graph(build([_rank(r) for r in range(4)]))
    assert ("/100", "/101", "peer") in _edges(g) and ("/101", "/100", "peer") in _edges(g)
    assert len(g.chains) == 1 and "a cycle" in g.chains[0], g.chains
    assert set(g.ends) == {"/100", "/101", "/102", "/103"}


def test_many_ranks_stay_linear_and_one_line() -> None:
    """512 ranks, one of them stopped: at most MAX_FANOUT edges each, one chain line."""
    ranks = [_rank(r, world_size=512) for r in range(512)]
    ranks[300] = _rank(300, world_size=512, state="T")
    g = _graph(build(ranks, n=2))
    assert len(g.edges) <= 512 * 8
    assert g.chains == (
        f"ranks 0{EN}299, 301{EN}511 → (peer) → rank 300: stopped (SIGSTOP or a debugger) - "
        "`kill -CONT 400`",
    )


def test_the_graph_does_not_change_the_verdict() -> None:
    for make, *_ in CASES.values():
        bundle = make()
        v = classify(bundle)
        assert v.graph is not None
        assert v.summary and v.state  # decided as before; the graph only rides along


def test_renders_the_graph_and_old_bundles_without_one(tmp_path: Path) -> None:
    bundle = _stopped_rank()
    verdict = classify(bundle)
    view = build_view(bundle, verdict, "computed")
    html = render_html(view)
    assert "<svg" in html and 'id="waits"' in html and "kill -CONT 102" in html
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org", "")
    md = render_markdown(view)
    assert "### Who waits on whom" in md and "kill -CONT 102" in md
    # A bundle written before the graph existed: its verdict has no "graph" key at all.
    old = msgspec.structs.replace(bundle, verdict=msgspec.structs.replace(verdict, graph=None))
    path = tmp_path / "old.json"
    path.write_bytes(msgspec.json.encode(old))
    assert b'"graph"' not in path.read_bytes()
    loaded = load_bundle(path)
    assert loaded.verdict is not None and loaded.verdict.graph is None
    old_view = build_view(loaded, loaded.verdict, "bundle")
    assert "Who waits on whom" not in render_markdown(old_view)
    assert 'id="waits"' in render_html(old_view)  # the section says there is no graph


@pytest.mark.slow
def test_real_pipe_deadlock_ends_in_a_cycle_of_parent_and_worker(tmp_path: Path) -> None:
    """pipe_deadlock.py: a parent and its spawned worker each wait in Connection.recv for the
    other. The graph's chain ends in a cycle of exactly those two processes."""
    started = start_ready([sys.executable, str(SCENARIOS / "pipe_deadlock.py")])
    try:
        out = tmp_path / "bundle.json"
        done = run_diag(["capture", "--pid", str(started.pid), "-o", str(out)], timeout_s=300)
    finally:
        started.stop()
    assert done.returncode == 0, done.stderr
    graph = json.loads(out.read_text())["verdict"]["graph"]
    edges = {(e["src"], e["dst"], e.get("kind", "peer")) for e in graph["edges"]}
    parent = f"/{started.pid}"
    # A multiprocessing Pipe is a unix socketpair: each end's peer is matched by inode.
    workers = [e[1] for e in edges if e[0] == parent and e[2] == "unix"]
    assert len(workers) == 1, (edges, graph["chains"])
    assert (workers[0], parent, "unix") in edges
    assert set(graph["ends"]) == {parent, workers[0]}, graph["chains"]
    assert any("a cycle" in c for c in graph["chains"]), graph["chains"]


def test_a_big_graph_draws_only_the_suspects_chains() -> None:
    ranks = [_rank(r, world_size=100) for r in range(100)]
    ranks[42] = _rank(42, world_size=100, state="T")
    bundle = build(ranks, n=2)
    view = build_view(bundle, classify(bundle), "computed")
    assert view.graph is not None
    assert len(view.graph.boxes) <= 40 and "only the suspects' chains" in view.graph.note
    stopped = next(b for b in view.graph.boxes if b.key == "/142")
    assert "end-bad" in stopped.css and stopped.anchor == "rank-42"
    assert "only the suspects" in render_html(view)
