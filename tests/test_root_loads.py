"""Root never loads or runs what another user wrote (issue #32).

diag runs as root beside jobs of other users, often with an environment that names their
directories (``sudo`` keeps ``HOME``, an agent passes ``XDG_CACHE_HOME``, the shell sits in a
shared ``cwd``). A planted file there that diag would load as code - a jinja2 bytecode cache
(unpickled, then its code ``exec``'d), a module found first on ``sys.path`` - runs as root. These
tests plant such files, as the attacker would (``nobody`` where the plant is another user's),
and show that a real diag run as root never executes them.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Tuple

import jinja2
import pytest
from conftest import NOBODY, PROGRAMS, as_nobody, run_diag

ROOT = os.geteuid() == 0
GOLDEN = Path(__file__).parent / "golden" / "bundles" / "lock_waiters.json"
TEMPLATE = "report.html.j2"


class _Payload:
    """Pickles to ``exec(code)``: what jinja2's ``Bucket.load_bytecode`` would run on load."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self) -> Tuple[Any, Tuple[str]]:
        return exec, (self.code,)


def _plant_cache(cache_dir: Path, marker: Path) -> Path:
    """A jinja2 bytecode cache file for diag's report template (the name the old per-user cache
    used: sha1 of the template name) whose first pickle writes ``marker``."""
    key = hashlib.sha1(TEMPLATE.encode("utf-8")).hexdigest()
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"__jinja2_{key}.cache"
    code = f"open({str(marker)!r}, 'w').write('ran as uid %d' % __import__('os').geteuid())"
    path.write_bytes(jinja2.bccache.bc_magic + pickle.dumps(_Payload(code), 2))
    return path


def test_the_planted_cache_is_a_live_payload_for_a_reader_that_trusts_it(tmp_path: Path) -> None:
    """The control: a jinja2 that reads this cache directory runs the planted code - so the
    tests below, where diag's render must not, test something real."""
    marker = tmp_path / "ran"
    cache = tmp_path / "cache"
    _plant_cache(cache, marker)
    env = jinja2.Environment(
        loader=jinja2.DictLoader({TEMPLATE: "x"}),
        bytecode_cache=jinja2.FileSystemBytecodeCache(str(cache)),
    )
    env.get_template(TEMPLATE)
    assert marker.exists()


def _render_env(home: Path, xdg_cache: Path) -> Dict[str, str]:
    return dict(os.environ, HOME=str(home), XDG_CACHE_HOME=str(xdg_cache))


def test_a_planted_template_cache_is_never_executed_by_a_render(tmp_path: Path) -> None:
    """A cache file in the very place the old per-user cache was read (a directory root owns,
    mode 0700): ``diag report`` and ``diag capture`` (whose warm-up preloads the template) render
    without reading it - templates compile in memory - and leave no cache file anywhere."""
    marker = tmp_path / "ran"
    xdg = tmp_path / "xdg-cache"
    home = tmp_path / "home"
    for base in (xdg, home / ".cache"):
        _plant_cache(base / "diag" / "jinja2", marker)
    before = sorted(p.name for p in (xdg / "diag" / "jinja2").iterdir())
    out = tmp_path / "out"
    out.mkdir()
    env = _render_env(home, xdg)
    result = run_diag(["report", str(GOLDEN), "-o", str(out / "r.html")], env=env)
    assert result.returncode == 0, result.stderr
    assert (out / "r.html").stat().st_size > 1000
    job = subprocess.Popen([sys.executable, str(PROGRAMS / "exit_soon.py"), "60"])
    try:
        args = ["capture", "--pid", str(job.pid), "--count", "2", "--interval", "1.5"]
        result = run_diag([*args, "-o", str(out / "cap")], env=env)
    finally:
        job.kill()
        job.wait()
    assert result.returncode in (0, 10), result.stderr
    assert (out / "cap.html").is_file()
    assert not marker.exists(), marker.read_text()
    assert sorted(p.name for p in (xdg / "diag" / "jinja2").iterdir()) == before


@pytest.mark.skipif(not ROOT or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_a_cache_path_nobody_links_elsewhere_is_never_followed(
    shared_tmp: Path, tmp_path: Path
) -> None:
    """``nobody`` plants ``$XDG_CACHE_HOME/diag`` and ``~/.cache/diag`` as symlinks to a
    directory of theirs holding the payload: root's render never reads through them, nor
    writes anything there."""
    theirs = shared_tmp / "theirs"
    marker = shared_tmp / "ran"
    payload = _plant_cache(shared_tmp / "staging", marker)
    payload.parent.chmod(0o755)
    payload.chmod(0o644)
    as_nobody("mkdir", "-p", str(theirs / "jinja2"))
    as_nobody("cp", str(payload), str(theirs / "jinja2" / payload.name))
    xdg, home = shared_tmp / "cache", shared_tmp / "home"
    as_nobody("mkdir", "-p", str(xdg), str(home / ".cache"))
    as_nobody("ln", "-s", str(theirs), str(xdg / "diag"))
    as_nobody("ln", "-s", str(theirs), str(home / ".cache" / "diag"))
    assert (xdg / "diag").is_symlink() and (xdg / "diag").lstat().st_uid == NOBODY
    before = sorted(p.name for p in (theirs / "jinja2").iterdir())
    out = tmp_path / "out"
    out.mkdir()
    env = _render_env(home, xdg)
    result = run_diag(["report", str(GOLDEN), "-o", str(out / "r.html")], env=env)
    assert result.returncode == 0, result.stderr
    assert not marker.exists(), marker.read_text()
    assert sorted(p.name for p in (theirs / "jinja2").iterdir()) == before
    assert all(p.lstat().st_uid == NOBODY for p in theirs.rglob("*"))


def test_the_capture_warm_up_compiles_the_template_once_in_memory() -> None:
    """``warm_templates`` (a capture's warm-up between samples) leaves the compiled template in
    the process's environment: the report after the last sample does not compile it again."""
    from diag.render.html import environment
    from diag.render.outputs import warm_templates

    warm_templates()
    env = environment()
    assert env.bytecode_cache is None
    assert env.get_template(TEMPLATE) is env.get_template(TEMPLATE)
    assert any(key[1] == TEMPLATE for key in env.cache or {})


def _plant_modules(directory: Path, marker: Path, names: Tuple[str, ...]) -> None:
    """Modules (``name.py``, or ``name/__init__.py`` for a dotted package) that record their
    import in ``marker``, in ``directory``, all of it owned by ``nobody`` when root runs this."""
    for name in names:
        path = directory / (f"{name}/__init__.py" if name.endswith("/") else f"{name}.py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"open({str(marker)!r}, 'a').write({name!r} + ' imported as uid %d\\n' "
            "% __import__('os').geteuid())\n",
            encoding="utf-8",
        )
    if ROOT:
        for path in [directory, *directory.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)


def test_python_m_diag_in_a_directory_of_planted_modules_imports_none(
    shared_tmp: Path, tmp_path: Path
) -> None:
    """``python -m diag`` puts its cwd first on sys.path; run from a directory another user
    filled with look-alikes of what diag imports next (click, msgspec, jinja2, json), it
    imports none of them: ``diag.__main__`` takes the cwd off before importing anything."""
    planted = shared_tmp / "job-dir"
    marker = shared_tmp / "imported"
    _plant_modules(planted, marker, ("click", "msgspec", "jinja2", "json", "markupsafe"))
    out = tmp_path / "out"
    out.mkdir()
    result = run_diag(["report", str(GOLDEN), "-o", str(out / "r.html")], cwd=planted)
    assert result.returncode == 0, result.stderr
    assert not marker.exists(), marker.read_text()
    assert (out / "r.html").is_file()


def test_the_nvml_worker_never_imports_from_diags_cwd(
    shared_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The NVML worker is ``python -m diag.probes.gpu.nvml_worker``: started from a job's
    directory holding a ``pynvml.py``, a ``json.py`` and a whole ``diag/`` package, it runs
    with ``-P`` from ``/`` and imports none of them (it answers as it would anywhere)."""
    from diag.probes.gpu.nvml_client import NvmlWorker

    planted = shared_tmp / "job-dir"
    marker = shared_tmp / "imported"
    _plant_modules(planted, marker, ("pynvml", "json", "diag/", "selectors"))
    monkeypatch.chdir(planted)
    worker = NvmlWorker()
    try:
        line = worker.request(timeout_s=60.0)
    finally:
        worker.close()
    assert line.startswith("{"), line
    assert not marker.exists(), marker.read_text()
