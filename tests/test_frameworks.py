"""Framework knowledge lives in the packs (``diag/frameworks/``), never in ``diag/verdict/``.

(a) No module-level table or regex of the verdict holds a name a pack lists (a frame, a
    file fragment, a process title, a thread prefix, a log pattern) or a framework's name:
    the cause modules read ``diag.frameworks.union``. Modules not moved yet are listed in
    ``NOT_YET_MOVED`` with why, printed, so the gap stays visible and shrinks.
(b) Every pack is pinned by a test: its key appears in some test file.
(c) docs/frameworks.md documents every field of ``Pack`` (and of its records), and its
    field table is the one ``docs/make_frameworks.py`` generates from base.py.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import runpy
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple, get_args

import pytest

from diag.frameworks import PACKS, base, union
from diag.vocab import (
    EVIDENCE_SIGNALS,
    REPORT_SECTIONS,
    WAIT_KINDS,
    LogKindMeaning,
    RankPhaseName,
    WaitFamily,
)

ROOT = Path(__file__).resolve().parent.parent
VERDICT = ROOT / "diag" / "verdict"

# Framework names, as words (case-insensitive): none may stand in a verdict table or regex.
FRAMEWORK_NAMES = (
    "sglang", "vllm", "torch", "torchrun", "c10d", "gloo", "nccl", "deepspeed", "accelerate",
    "ray", "raylet", "uvicorn", "gunicorn", "fastapi", "zmq", "pyzmq", "transformers",
    "safetensors", "huggingface", "modelscope", "tokenizers", "filelock", "portalocker",
    "fasteners", "triton", "inductor", "dynamo", "mpi", "ucx", "ucp", "grpc", "dask", "slurm",
    "srun", "mpirun", "fuse", "pdb",
)  # fmt: skip
_NAME_RE = re.compile(r"(?<![a-z])(?:" + "|".join(FRAMEWORK_NAMES) + r")(?![a-z])", re.I)

# Modules whose tables are not moved yet, and why (each one a gap to close). Empty: the NCCL
# log kinds are the packs' ``log_kinds``, torchrun's options its ``agent_options``, FUSE's
# mount kind its ``serves_fs``.
NOT_YET_MOVED: Dict[str, str] = {}
# Literals inside functions (not tables) that still name a framework or a pack's name, per
# module: the inline half of the same gap, printed and shrinking the same way.
NOT_YET_MOVED_INLINE: Dict[str, str] = {}
# Owned by the rule-docs work: ``examples`` name recorded captures (``vllm_tp2_...``), which
# are file names of samples, not framework knowledge.
NOT_KNOWLEDGE = {"rules/__init__.py", "rules/base.py"}

# Words that are both a pack's frame name and a generic word of the verdict's own vocabulary
# (a wait kind, a state, a syscall): the verdict may say "accept" or "sleep" about any wait.
GENERIC = {
    "accept", "sleep", "poll", "select", "lock", "join", "result", "child", "queue", "wait",
    "stopped", "read", "write", "recv", "get", "run", "done", "value", "worker", "scheduler",
    "handle", "emit", "forward", "download", "synchronize", "collective", "rendezvous",
    "exception", "next", "callback", "monitor", "query", "empty", "full", "exists", "send",
    "load", "compile",
    # Python's finalizer hook: a language name, not a library's.
    "__del__",
    # Weight files' formats (a file suffix list, not a framework's table); a resource.
    ".safetensors", "memory",
}  # fmt: skip
# The closed sets the records use (wait kinds, start-up phases, roles) are the verdict's words.
GENERIC |= {*WAIT_KINDS, *get_args(RankPhaseName)}
GENERIC |= set(get_args(base.FrameworkRole))
GENERIC |= {*get_args(base.ClockStart), *get_args(base.ClockAction)}
# The report's role column and a pause's party are the verdict's words too.
GENERIC |= {r.role for p in PACKS for r in p.titled_roles}
GENERIC |= {c.role for p in PACKS for c in p.command_roles}
GENERIC |= {f.party for p in PACKS for f in p.flow_pauses}
GENERIC |= set(get_args(WaitFamily))  # "serve", "peer", ... (vllm's "serve" subcommand too)
# The evidence the verdict writes and the report sections it links them to: stored names of
# diag.vocab's closed sets ("nccl-ras", "nccl-logs"), the verdict's output, not its knowledge;
# and what a log kind means ("failure").
GENERIC |= {*EVIDENCE_SIGNALS, *REPORT_SECTIONS, *get_args(LogKindMeaning)}


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (tuple, list, frozenset, set)):
        for v in value:
            yield from _strings(v)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.name not in ("name", "key", "what", "source", "sources", "knob"):
                yield from _strings(getattr(value, f.name))


def pack_vocabulary() -> Set[str]:
    """Every name the packs list (frames, files, titles, thread prefixes, log patterns)."""
    words: Set[str] = set()
    for pack in PACKS:
        words.update(_strings(pack))
    return {w for w in words if len(w) > 2 and w not in GENERIC}


def _regex_sources(tree: ast.AST) -> Set[int]:
    """ids of the string constants that are a regex's source (``re.compile(...)``)."""
    out: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "compile":
            out.update(id(a) for a in ast.walk(node) if isinstance(a, ast.Constant))
    return out


def _table_literals(path: Path) -> Iterator[Tuple[int, str, str, bool]]:
    """(line, table, string, is a regex) for string constants of module-level assignments."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    regexes = _regex_sources(tree)
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        name = getattr(target, "id", "?")
        if name == "__all__":
            continue
        for sub in ast.walk(node.value):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                yield sub.lineno, name, sub.value, id(sub) in regexes


def _verdict_modules() -> List[Path]:
    return sorted(VERDICT.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(VERDICT).as_posix()


def test_verdict_tables_name_no_framework() -> None:
    vocab = pack_vocabulary()
    found: List[str] = []
    for path in _verdict_modules():
        rel = _rel(path)
        if rel in NOT_YET_MOVED or rel in NOT_KNOWLEDGE:
            continue
        for line, table, text, regex in _table_literals(path):
            if text in GENERIC:
                continue
            # A name, a path, a title or a regex naming a framework; prose (a sentence the
            # verdict prints) may name one.
            named = (regex or not re.search(r"\s", text)) and _NAME_RE.search(text)
            if text in vocab or named:
                found.append(f"diag/verdict/{rel}:{line} {table}: {text!r}")
    print("NOT_YET_MOVED:", *(f"\n  {m}: {why}" for m, why in NOT_YET_MOVED.items()))
    assert not found, "framework knowledge in the verdict - move it to its pack:\n" + "\n".join(
        found
    )


def _inline_literals(path: Path) -> Iterator[Tuple[int, str, bool]]:
    """(line, string, is a regex) for every string constant but docstrings and f-string
    parts (prose a report prints)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: Set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
    regexes = _regex_sources(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value, id(node) in regexes


def test_verdict_code_names_no_framework() -> None:
    """The same grep over literals inside functions (``if "torch/x.py" in f.filename``)."""
    vocab = pack_vocabulary()
    found: List[str] = []
    for path in _verdict_modules():
        rel = _rel(path)
        if rel in NOT_YET_MOVED or rel in NOT_YET_MOVED_INLINE or rel in NOT_KNOWLEDGE:
            continue
        for line, text, regex in _inline_literals(path):
            if text in GENERIC:
                continue
            named = (regex or not re.search(r"\s", text)) and _NAME_RE.search(text)
            if text in vocab or named:
                found.append(f"diag/verdict/{rel}:{line}: {text!r}")
    print("NOT_YET_MOVED_INLINE:", *(f"\n  {m}: {w}" for m, w in NOT_YET_MOVED_INLINE.items()))
    assert not found, "framework knowledge in verdict code - move it to its pack:\n" + "\n".join(
        found
    )


def test_not_yet_moved_lists_only_modules_that_exist() -> None:
    """An entry for a module that was moved (or removed) must go: the list only shrinks."""
    for rel in (*NOT_YET_MOVED, *NOT_YET_MOVED_INLINE):
        assert (VERDICT / rel).exists(), rel


def test_the_vocabulary_is_not_empty() -> None:
    """The grep above is only as strong as the packs: it must see their names."""
    vocab = pack_vocabulary()
    assert {"init_process_group", "pt_gloo", "sglang::", "_worker_loop"} <= vocab


def test_every_pack_is_tested() -> None:
    tests = [p for p in (ROOT / "tests").glob("test_*.py") if p.name != "test_frameworks.py"]
    texts = " ".join(p.read_text(encoding="utf-8") for p in tests)
    untested = [p.key for p in PACKS if not re.search(rf"\b{re.escape(p.key)}\b", texts)]
    assert not untested, f"packs no test names (add one pinning their verdicts): {untested}"


def test_pack_keys_are_their_modules() -> None:
    from diag.frameworks import _MODULES

    assert [p.key for p in PACKS] == list(_MODULES)
    assert len({p.key for p in PACKS}) == len(PACKS)


def _documented_records() -> List[type]:
    records = [base.Pack, base.Clock, base.RoleSign, base.FrameSign, base.FrameWait]
    return [*records, base.FlowPause, base.AgentOptions, base.LogKind]


def test_docs_document_every_field() -> None:
    doc = (ROOT / "docs" / "frameworks.md").read_text(encoding="utf-8")
    missing = [
        f"{record.__name__}.{f.name}"
        for record in _documented_records()
        for f in dataclasses.fields(record)
        if f"`{f.name}`" not in doc
    ]
    assert not missing, f"docs/frameworks.md does not document: {missing}"


def test_docs_field_table_is_generated() -> None:
    """The field table in docs/frameworks.md is the one make_frameworks.py writes now."""
    make = runpy.run_path(str(ROOT / "docs" / "make_frameworks.py"))
    doc = (ROOT / "docs" / "frameworks.md").read_text(encoding="utf-8")
    assert make["render"](doc) == doc, "run: .venv/bin/python docs/make_frameworks.py"


@pytest.mark.parametrize("pack", PACKS, ids=lambda p: p.key)
def test_pack_regexes_compile(pack: base.Pack) -> None:
    for source in (*pack.ready_lines, *pack.death_lines, *pack.death_rank_patterns):
        re.compile(source)
    for _, source in pack.startup_lines:
        re.compile(source)
    for pause in pack.flow_pauses:  # a framework's own pauses (diag.verdict.flow_control)
        for source in (pause.pause_line, pause.resume_line):
            re.compile(source)


def test_union_is_lookup_tables() -> None:
    """The union is computed once into sets, tuples and compiled regexes (the 4,096-rank
    benchmark reads it per frame): no per-call work."""
    assert isinstance(union.RENDEZVOUS_FRAMES, frozenset)
    assert isinstance(union.BACKEND_THREADS, tuple)
    assert isinstance(union.READY_LINE, re.Pattern)
    assert all(isinstance(v, tuple) for v in union.FRAME_WAITS.values())
