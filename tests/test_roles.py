"""Names from titles: what a process is in its framework (diag.text.roles), as the verdict's
sentences (wording.who) and the reports' tables show it."""

from __future__ import annotations

from typing import Optional, Sequence

import pytest

from diag.model import ProcessInfo
from diag.text.roles import FrameworkRole, framework_role, named
from diag.verdict.features import ProcSignals
from diag.verdict.wording import who


@pytest.mark.parametrize(
    ("cmdline", "comm", "role", "name", "indexed"),
    [
        (["sglang::scheduler"], "sglang::schedul", "scheduler", "scheduler", False),
        (["sglang::scheduler_TP0"], "sglang::schedul", "scheduler", "scheduler TP0", True),
        (["sglang::scheduler_DP1_TP3"], "", "scheduler", "scheduler DP1 TP3", True),
        (["sglang::detokenizer"], "sglang::detoken", "detokenizer", "detokenizer", False),
        (["sglang::data_parallel_controller"], "", "DP controller", "DP controller", False),
        (["/v/bin/python", "-m", "sglang.launch_server", "--model-path", "m"], "python",
         "API server", "main (HTTP + tokenizer)", False),
        (["/v/bin/python", "/v/bin/sglang", "serve", "--model-path", "m"], "sglang",
         "API server", "main (HTTP + tokenizer)", False),
        (["/v/bin/python3.11", "/v/bin/vllm", "serve", "m"], "vllm", "API server",
         "API server (vllm serve)", False),
        (["VLLM::EngineCore"], "VLLM::EngineCor", "engine core", "EngineCore", False),
        (["VLLM::Worker_TP1"], "VLLM::Worker_TP", "worker", "worker TP1", True),
        (["/v/bin/python", "-B", "-c", "from multiprocessing.resource_tracker import main"],
         "python", "helper", "resource tracker", False),
        # A zombie: no cmdline, the kernel's 15-byte name.
        ([], "sglang::schedul", "scheduler", "scheduler", False),
        ([], "VLLM::EngineCor", "engine core", "EngineCore", False),
    ],
)  # fmt: skip
def test_framework_role(
    cmdline: Sequence[str], comm: str, role: str, name: str, indexed: bool
) -> None:
    assert framework_role(cmdline, comm) == FrameworkRole(role, name, indexed)


@pytest.mark.parametrize(
    ("cmdline", "comm"),
    [
        (["python", "train.py"], "python"),
        (["torchrun", "--nproc-per-node", "4", "train.py"], "torchrun"),
        # The stdlib imitation's thread-style names are not SGLang's titles.
        (["python", "_sglang_like.py"], "sglang::sched_1"),
        (["sglang::http"], "sglang::http"),
    ],
)
def test_no_framework_role(cmdline: Sequence[str], comm: str) -> None:
    assert framework_role(cmdline, comm) is None


def test_named_says_the_rank_or_pid_only_where_the_name_does_not() -> None:
    assert named(FrameworkRole("scheduler", "scheduler TP1", True), 1, 42) == "scheduler TP1"
    assert named(FrameworkRole("worker", "worker"), 2, 42) == "worker (rank 2)"
    assert named(FrameworkRole("detokenizer", "detokenizer"), None, 42) == "detokenizer (pid 42)"
    main = FrameworkRole("API server", "main (HTTP + tokenizer)")
    assert named(main, None, 42) == "main (HTTP + tokenizer, pid 42)"


def _proc(
    pid: int, cmdline: Sequence[str], comm: str = "", rank: Optional[int] = None
) -> ProcSignals:
    info = ProcessInfo(pid=pid, name=comm, cmdline=tuple(cmdline), rank=rank)
    return ProcSignals(key=("", pid), info=info)


def test_who_names_framework_processes_and_keeps_the_rest() -> None:
    main = _proc(10, ["python", "-m", "sglang.launch_server"], "python")
    tp0 = _proc(11, ["sglang::scheduler_TP0"], rank=0)
    tp1 = _proc(12, ["sglang::scheduler_TP1"], rank=1)
    detok = _proc(13, ["sglang::detokenizer"])
    plain = [_proc(20, ["python", "train.py"], rank=3), _proc(21, ["python", "x.py"])]
    assert who([tp1]) == "scheduler TP1"
    assert who([detok]) == "detokenizer (pid 13)"
    assert who([main]) == "main (HTTP + tokenizer, pid 10)"
    assert who([tp0, tp1]) == "schedulers (ranks 0\u20131)"
    assert who(plain) == "rank 3 and pid 21"  # no title: as before
    assert who([tp1, *plain]) == "scheduler TP1 and rank 3 and pid 21"
