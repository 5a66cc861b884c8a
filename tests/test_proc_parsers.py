"""Parsers on recorded /proc text (tests/data/proc, see its README), through an injected root."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.probes.host import parse_boot_time
from diag.probes.procfs import ProcFS
from diag.probes.proctree import (
    RankInfo,
    assign_roles,
    detect_rank,
    infer_dead_rank,
    parse_cmdline,
    read_identity,
    start_order_groups,
    title_of,
)
from diag.probes.resources import parse_io, read_resources
from diag.probes.sockets import listen_ports, parse_net_tcp
from diag.probes.threads import (
    decode_wait_status,
    parse_parent,
    parse_syscall,
    parse_task_stat,
    read_threads,
)

DATA = Path(__file__).resolve().parent / "data" / "proc"
MISC = DATA / "misc"
PID = 8964
FAKE = ProcFS(DATA)


def test_stat_name_with_parenthesis_split_after_last_paren() -> None:
    stat = parse_task_stat((DATA / "8964/task/9006/stat").read_text())
    assert stat.name == "w) R 1 (x"
    assert stat.state == "S"
    assert stat.ppid == 1  # reparented to init when recorded
    assert stat.num_threads == 3


def test_stat_zombie_exit_status() -> None:
    zero = parse_task_stat((MISC / "stat_zombie").read_text())
    three = parse_task_stat((MISC / "stat_zombie_exit3").read_text())
    assert (zero.state, three.state) == ("Z", "Z")
    assert decode_wait_status(zero.exit_code) == 0
    assert decode_wait_status(three.exit_code) == 3
    assert decode_wait_status(9) == -9  # killed by SIGKILL


@pytest.mark.parametrize(
    ("name", "machine", "syscall", "nr", "addr", "op"),
    [
        ("syscall_running", "x86_64", "running", None, None, None),
        ("syscall_none", "x86_64", "none", -1, None, None),
        ("syscall_gil_wait", "x86_64", "futex", 202, "0x7f447914e6f4", 0x89),
        ("syscall_aarch64_futex", "aarch64", "futex", 98, "0xffff8a3c1e70", 0x189),
    ],
)
def test_syscall_forms(
    name: str, machine: str, syscall: str, nr: object, addr: object, op: object
) -> None:
    info = parse_syscall((MISC / name).read_text(), machine)
    assert (info.syscall, info.nr, info.futex_addr, info.futex_op) == (syscall, nr, addr, op)


def test_syscall_unknown_number_and_garbage() -> None:
    assert parse_syscall("0 0x3 0x1 0x2 0x0 0x0 0x0 0x7ffd 0x7f", "x86_64").syscall == "read"
    assert parse_syscall("0 0x3 0x1 0x2 0x0 0x0 0x0 0x7ffd 0x7f", "x86_64").fd == 3
    assert parse_syscall("1 0x0 0x1 0x2 0x0 0x0 0x0 0x7ffd 0x7f", "x86_64").fd == 0
    assert parse_syscall("999 0x0 0x0 0x0 0x0 0x0 0x0 0x1 0x2", "x86_64").syscall == "nr_999"
    assert parse_syscall("202 0x1 0x80 0 0 0 0 0 0", "riscv64").syscall == "nr_202"
    assert parse_syscall("", "x86_64").syscall is None


def test_threads_of_recorded_process_share_futex_address() -> None:
    threads = {t.tid: t for t in read_threads(FAKE, PID, "x86_64")}
    assert set(threads) == {8964, 9006, 9007}
    waiters = [threads[9006], threads[9007]]
    assert {t.futex_addr for t in waiters} == {"0x55e1bb542720"}
    assert all(t.futex_op == 0x189 and t.wchan == "futex_do_wait" for t in waiters)
    assert threads[8964].syscall == "clock_nanosleep"
    assert threads[8964].wchan == "hrtimer_nanosleep"
    assert threads[9006].voluntary_ctxt_switches == 1
    assert threads[9006].nonvoluntary_ctxt_switches == 0


def test_resources_and_io() -> None:
    res = read_resources(FAKE, PID, 4096)
    assert res.stat.num_threads == 3
    assert res.rss_bytes == res.stat.rss_pages * 4096 > 0
    assert res.io is not None
    assert (res.io.rchar, res.io.wchar, res.io.write_bytes) == (1796781, 1716, 8192)
    assert parse_io("rchar: 5\nbogus line\n").rchar == 5


def test_listening_ports_joined_through_fd_links() -> None:
    assert listen_ports(FAKE, [PID]) == {PID: (36371, 43623)}
    table = parse_net_tcp((DATA / "8964/net/tcp").read_text())
    assert table[14212] == 36371
    assert all(port > 0 for port in table.values())


def test_identity_and_boot_time() -> None:
    ident = read_identity(FAKE, PID)
    assert ident.cmdline[1:] == ("rec.py",)
    assert ident.environ is not None and b"RANK=3" in ident.environ
    assert parse_boot_time((DATA / "stat").read_text()) == 1796023977.0


def test_cmdline_forms() -> None:
    assert parse_cmdline(b"python\x00-m\x00x\x00") == ("python", "-m", "x")
    assert parse_cmdline(b"sglang::scheduler_TP3" + b"\x00" * 40) == ("sglang::scheduler_TP3",)
    assert parse_cmdline(b"") == ()


@pytest.mark.parametrize(
    ("env", "argv", "title", "rank", "source"),
    [
        ({"RANK": "3", "LOCAL_RANK": "1"}, ["--rank", "5"], "", 3, "env:RANK"),
        ({"OMPI_COMM_WORLD_RANK": "7"}, [], "", 7, "env:OMPI_COMM_WORLD_RANK"),
        ({}, ["python", "w.py", "--rank=4"], "", 4, "argv:--rank"),
        ({}, ["python", "w.py", "--tp_rank", "2"], "", 2, "argv:--tp-rank"),
        ({}, ["torchrun", "--node_rank", "1", "t.py"], "torchrun", None, None),
        ({}, ["sglang::scheduler_TP3"], "sglang::scheduler_TP3", 3, "title:"),
        ({}, ["x"], "sglang::scheduler_DP1_TP6_EP0", 6, "title:"),
        ({}, ["x"], "VllmWorker rank=2 pid=77", 2, "title:"),
        ({}, ["x"], "VLLM::Worker_TP1", 1, "title:"),
        # TP=1: one unsuffixed worker. Not rank 0 on purpose: with a rank in the job, the
        # stopped API server / EngineCore (not ranks) no longer decide the verdict (#16).
        ({}, ["VLLM::Worker"], "VLLM::Worker", None, None),
        ({}, ["VLLM::EngineCore"], "VLLM::EngineCore", None, None),
        ({}, ["VLLM::EngineCore_DP1"], "VLLM::EngineCore_DP1", None, None),
        ({}, ["ray::IDLE"], "ray::IDLE", None, None),
        ({}, ["ray::RayWorkerWrapper.execute_method"], "ray::RayWorkerWrapper", None, None),
        ({}, ["python", "train.py"], "python", None, None),
    ],
)
def test_rank_precedence(env: dict, argv: list, title: str, rank: object, source: object) -> None:
    info = detect_rank(env, argv, title)
    assert info.rank == rank
    if isinstance(source, str):
        assert info.source is not None and info.source.startswith(source)
    else:
        assert info.source is None


def test_rank_from_recorded_environ_and_local_rank() -> None:
    info = detect_rank({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8"}, [], "")
    assert info == RankInfo(3, 1, 8, "env:RANK")
    assert title_of(["python", "a.py"], "python3") == "python3"
    assert title_of(["sglang::scheduler_TP0"], "sglang::schedul") == "sglang::scheduler_TP0"


def test_roles_by_tree_position() -> None:
    parents = {1: None, 2: 1, 3: 1, 4: 2, 5: 2, 6: 1}
    ranks = {
        2: RankInfo(0, source="env:RANK"),
        3: RankInfo(1, source="env:RANK"),
        4: RankInfo(0, source="env:RANK"),  # a forked DataLoader worker of rank 0
        5: RankInfo(),
        6: RankInfo(),
    }
    roles = assign_roles(1, parents, ranks)
    assert roles == {1: "launcher", 2: "rank", 3: "rank", 4: "helper", 5: "helper", 6: "worker"}
    assert assign_roles(9, {9: None}, {}) == {9: "process"}
    assert assign_roles(9, {9: None, 10: 9}, {}) == {9: "launcher", 10: "worker"}


def test_vllm_and_ray_titles_give_roles() -> None:
    """`vllm serve` -> `VLLM::EngineCore` -> `VLLM::Worker` (TP=1): a launcher and two workers;
    at TP=2 the `VLLM::Worker_TP<n>` are ranks and the EngineCore launches them. Ray's idle
    pool workers (`ray::IDLE`) under a raylet are workers, never ranks."""
    titles = {1: "vllm", 2: "VLLM::EngineCore", 3: "VLLM::Worker"}
    ranks = {pid: detect_rank({}, [t], t) for pid, t in titles.items()}
    assert assign_roles(1, {1: None, 2: 1, 3: 2}, ranks) == {
        1: "launcher",
        2: "worker",
        3: "worker",
    }
    titles = {1: "vllm", 2: "VLLM::EngineCore", 3: "VLLM::Worker_TP0", 4: "VLLM::Worker_TP1"}
    ranks = {pid: detect_rank({}, [t], t) for pid, t in titles.items()}
    assert assign_roles(1, {1: None, 2: 1, 3: 2, 4: 2}, ranks) == {
        1: "launcher",
        2: "launcher",
        3: "rank",
        4: "rank",
    }
    assert [ranks[3].rank, ranks[4].rank] == [0, 1]
    titles = {1: "raylet", 2: "ray::IDLE", 3: "ray::IDLE"}
    ranks = {pid: detect_rank({}, [t], t) for pid, t in titles.items()}
    assert assign_roles(1, {1: None, 2: 1, 3: 1}, ranks) == {
        1: "launcher",
        2: "worker",
        3: "worker",
    }


def test_dead_rank_inferred_only_when_unambiguous() -> None:
    parents = {1: None, 2: 1, 3: 1, 4: 1, 5: 1}
    ranks = {pid: RankInfo(pid - 2, None, 4, "env:RANK") for pid in (2, 3, 5)}
    assert infer_dead_rank(parents, ranks, {4}) == {
        4: RankInfo(2, None, 4, "inferred:missing-rank")
    }
    assert infer_dead_rank(parents, ranks, set()) == {}  # no zombie: a helper, not a rank
    two_missing = {pid: RankInfo(pid - 2, None, 5, "env:RANK") for pid in (2, 3, 5)}
    assert infer_dead_rank(parents, two_missing, {4}) == {}


def test_start_order_groups() -> None:
    argv = ("python", "train.py")
    spawned = ("python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(7)")
    parents = {1: None, 2: 1, 3: 1, 4: 1, 5: 1, 6: 2, 7: 2}
    cmdlines = {
        1: argv,
        2: argv,
        3: argv,
        4: (),
        5: ("python", "-c", "resource_tracker"),
        6: spawned,
        7: spawned,
    }
    ticks = {2: 30, 3: 10, 4: 20, 5: 5, 6: 1, 7: 2}
    groups = start_order_groups(parents, {}, cmdlines, ticks, zombies={4})
    # 3, 4 (a zombie, argv gone) and 2 by start; 2's spawned children are their own group.
    assert sorted(groups) == [[3, 4, 2], [6, 7]]
    ranked = {2: RankInfo(0, source="env:RANK")}
    assert start_order_groups(parents, ranked, cmdlines, ticks, zombies={4}) == []
    assert start_order_groups({1: None, 2: 1}, {}, {1: argv, 2: argv}, {}, set()) == []


@pytest.mark.parametrize(
    "text,timed",
    [
        ("232 0x3 0x7f 0x400 0xffffffff 0x0 0x0 0x7ffd 0x7f", False),  # epoll_wait(-1): forever
        ("232 0x3 0x7f 0x400 0x3e8 0x0 0x0 0x7ffd 0x7f", True),  # a timer 1 s away
        ("7 0x3 0x1 0xffffffffffffffff 0x0 0x0 0x0 0x7ffd 0x7f", False),  # poll(-1)
        ("202 0x55 0x189 0x0 0x0 0x0 0xffffffff 0x7ffd 0x7f", False),  # futex, NULL timeout
        ("202 0x55 0x89 0x0 0x7ffd10 0x0 0xffffffff 0x7ffd 0x7f", True),  # GIL wait
        ("45 0x3 0x7f 0x2000 0x0 0x0 0x0 0x7ffd 0x7f", False),  # recvfrom: no timeout
        ("230 0x1 0x0 0x7ffd 0x0 0x0 0x0 0x7ffd 0x7f", True),  # clock_nanosleep
        ("running", None),
    ],
)
def test_syscall_timeout(text: str, timed: object) -> None:
    assert parse_syscall(text, "x86_64").timed is timed


def test_parent_fields_agree_with_the_full_parse() -> None:
    """The process tree's fast parse reads the same ppid and start time as ``TaskStat``."""
    for path in [DATA / "8964/task/9006/stat", MISC / "stat_zombie", MISC / "stat_zombie_exit3"]:
        text = path.read_text()
        full = parse_task_stat(text)
        assert parse_parent(text) == (full.ppid, full.start_ticks)
