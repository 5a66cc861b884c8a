"""The package layout is the pipeline: imports only go down the stages (README, "Where things are").

Parsed from the source (``ast``), so a lazy import inside a function counts as much as one at
the top: a renderer that imports the classifier "only when needed" still breaks the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1] / "diag"

# Stage -> the stages it may import (besides itself). "base" is what every stage shares:
# the records, the errors, the redactor, the bundle format, the shared wording.
BASE = "base"
ALLOWED: Dict[str, Set[str]] = {
    BASE: set(),
    "probes": {BASE},
    "collect": {BASE, "probes"},
    "verdict": {BASE},
    "render": {BASE},
    "commands": {BASE, "probes", "collect", "verdict", "render"},
    "watch": {BASE, "probes", "collect", "verdict", "render", "commands"},
    "slurm": {BASE, "probes", "collect", "verdict", "render", "commands", "watch"},
    "demo": {BASE, "probes", "collect", "verdict", "render", "commands", "watch"},
    "mcp": {BASE, "probes", "collect", "verdict", "render", "commands", "watch"},
    "cli": {
        *(BASE, "probes", "collect", "verdict", "render", "commands", "watch", "slurm", "demo"),
        "mcp",
    },
}
BASE_MODULES = {"diag", "diag.errors", "diag.model"}
BASE_MODULES |= {"diag.frames", "diag.vocab"}
BASE_PACKAGES = ("diag.bundle", "diag.model", "diag.text", "diag.redaction", "diag.frameworks")
BASE_PACKAGES += ("diag.report_templates",)
CLI_MODULES = {"diag.cli", "diag.cli_options", "diag.__main__"}
MAX_TOP_LEVEL_MODULES = 10


def stage_of(module: str) -> str:
    if module in BASE_MODULES or module.startswith(tuple(p + "." for p in BASE_PACKAGES)):
        return BASE
    if module in BASE_PACKAGES:
        return BASE
    if module in CLI_MODULES:
        return "cli"
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in ALLOWED:
        return parts[1]
    raise AssertionError(f"{module}: in no stage - add it to a package or to ALLOWED")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> Iterator[Tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for alias in node.names:  # `from diag.probes import nccl` imports a package too
                yield node.lineno, f"{node.module}.{alias.name}"


def sources() -> Iterator[Path]:
    return iter(sorted(ROOT.rglob("*.py")))


def _known(name: str) -> bool:
    path = ROOT.parent / Path(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def test_imports_only_go_down_the_stages() -> None:
    broken = []
    for path in sources():
        mod = module_name(path)
        stage = stage_of(mod)
        for line, name in imports_of(path):
            if not (name == "diag" or name.startswith("diag.")) or not _known(name):
                continue  # stdlib, third party, or `from pkg import function`
            target = stage_of(name)
            if target != stage and target not in ALLOWED[stage]:
                broken.append(f"{path.relative_to(ROOT.parent)}:{line}: {stage} imports {name}")
    assert not broken, "imports that go up the pipeline:\n" + "\n".join(broken)


def test_top_level_holds_few_modules_and_every_package_says_what_it_is() -> None:
    top = sorted(p.name for p in ROOT.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    for init in ROOT.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 80, f"{init}: say what the stage does and what it may import"


def test_every_package_ships_in_the_wheel() -> None:
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT.parent / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    packages = {module_name(init) for init in ROOT.rglob("__init__.py")}
    assert packages <= listed, f"missing from pyproject's package list: {packages - listed}"
    assert "diag.report_templates" in listed


@pytest.mark.parametrize(
    ("module", "stage"),
    [
        ("diag.model", BASE),
        ("diag.bundle.io", BASE),
        ("diag.probes.cpython.pyframes", "probes"),
        ("diag.verdict.classify", "verdict"),
        ("diag.cli", "cli"),
    ],
)
def test_stage_of(module: str, stage: str) -> None:
    assert stage_of(module) == stage


def test_the_redactor_is_one_package_that_never_imports_back_up() -> None:
    """The redactor once lived in three homes (``redact.py``, ``secret_patterns.py`` and
    ``redaction/``) and its rules imported the module above them that imported them back:
    now one package whose modules import their siblings and the shared text helpers only."""
    assert not (ROOT / "redact.py").exists() and not (ROOT / "secret_patterns.py").exists()
    outside = []
    for path in sorted((ROOT / "redaction").rglob("*.py")):
        for line, name in imports_of(path):
            if name.startswith("diag.") and not name.startswith(("diag.redaction", "diag.text")):
                outside.append(f"{path.relative_to(ROOT.parent)}:{line}: {name}")
    assert not outside, outside
