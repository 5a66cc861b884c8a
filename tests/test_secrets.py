"""THE planted-secret test: secrets planted in a real target never reach any diag output.

A real Python process gets secrets in its environment (HF_TOKEN, MY_API_KEY, an NCCL variable
whose URL embeds user:pass@), in argv (--api-key X, --token=X, --db-password X), in a log file
it writes (token=..., a Bearer header, echoes of its env and argv) and in a thread name. The
real CLI captures it; then every file in the output directory - whatever formats exist now or
are added later (.json, .jsonl, .html, .md, .log...) - and diag's own stdout/stderr are searched
for every secret. The test also checks the capture really saw those places, so a passing
result cannot come from capturing nothing.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from diag.bundle.io import load_bundle
from diag.redaction.redact import PLACEHOLDER
from tests.conftest import Started, run_diag

TARGET = r"""
import os, sys, threading, time
log_path = sys.argv[sys.argv.index('--log-file') + 1]
with open(log_path, 'a') as f:
    f.write('starting worker\n')
    f.write('auth ok token=%s\n' % os.environ['PLANT_LOG_TOKEN_SRC'][::-1])
    f.write('GET /v1 Authorization: Bearer %s\n' % os.environ['PLANT_BEARER_SRC'][::-1])
    f.write('env echo %s %s\n' % (os.environ['MY_API_KEY'], os.environ['HF_TOKEN']))
    f.write('argv echo %s\n' % ' '.join(sys.argv))
    f.write('step 1 loss 2.5\n')
stop = threading.Event()
t = threading.Thread(target=stop.wait, name='worker-' + os.environ['MY_API_KEY'], daemon=True)
t.start()
print('READY', flush=True)
time.sleep(300)
"""


def _token(prefix: str = "") -> str:
    return prefix + secrets.token_hex(12)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["capture", "watch"])
def test_planted_secrets_never_reach_any_output(spawn: Any, tmp_path: Path, command: str) -> None:
    """capture writes .json/.html/.md; watch adds its .jsonl journal (and a .log when it logs)."""
    plant: Dict[str, str] = {
        "hf": "hf_" + secrets.token_hex(17),
        "api_env": _token("envkey"),
        "wandb": secrets.token_hex(20),
        "nccl_pw": _token("ncclpw"),
        "arg_key": _token("argkey"),
        "arg_token": _token("argtok"),
        "arg_pw": _token("argpw"),
        "log_token": _token("logtok"),  # appears only in the log, after token=
        "bearer": _token("bearer"),  # appears only in the log, in a Bearer header
    }
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    log = tmp_path / "run" / "worker.log"
    log.parent.mkdir()
    env = {
        "HF_TOKEN": plant["hf"],
        "MY_API_KEY": plant["api_env"],
        "WANDB_API_KEY": plant["wandb"],
        "NCCL_RAS_ADDR": f"http://ncuser:{plant['nccl_pw']}@10.1.2.3:9999",
        "NCCL_DEBUG": "INFO",
        "RANK": "0",
        # The log-only secrets reach the target reversed, so its environment does not hold
        # them: diag must catch them by shape (token=, Bearer), not by a learned value.
        "PLANT_LOG_TOKEN_SRC": plant["log_token"][::-1],
        "PLANT_BEARER_SRC": plant["bearer"][::-1],
    }
    argv = [
        sys.executable, "-u", str(script), "--log-file", str(log),
        "--api-key", plant["arg_key"], f"--token={plant['arg_token']}",
        "--db-password", plant["arg_pw"], "--tp", "1",
    ]  # fmt: skip
    target: Started = spawn(argv, env=env)

    outdir = tmp_path / "out"
    outdir.mkdir()
    result = run_diag(
        [
            command, "--pid", str(target.pid), "--count", "2", "--interval", "0.5",
            "-o", str(outdir / "report.html"), "--log", str(log),
        ],
        cwd=outdir,
    )  # fmt: skip
    assert result.returncode in (0, 10), result.stderr

    files = [p for p in outdir.rglob("*") if p.is_file()]
    suffixes = {p.suffix for p in files}
    assert {".json", ".html", ".md"} <= suffixes, files
    if command == "watch":
        assert ".jsonl" in suffixes, files  # its own .log too, whenever it writes one
    leaks: List[str] = []
    for path in files:
        data = path.read_bytes()
        leaks += [
            f"{name} in {path.name}" for name, value in plant.items() if value.encode() in data
        ]
    for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        leaks += [f"{name} in diag {stream}" for name, value in plant.items() if value in text]
    assert not leaks, leaks

    # Not vacuous: the capture saw every place a secret was planted.
    bundle = load_bundle(next(p for p in files if p.suffix == ".json"))
    proc = next(p for p in bundle.processes if p.pid == target.pid)
    assert proc.env["RANK"] == "0" and proc.env["NCCL_DEBUG"] == "INFO"
    assert proc.env["NCCL_RAS_ADDR"] == f"http://{PLACEHOLDER}@10.1.2.3:9999"
    assert "HF_TOKEN" not in proc.env and "MY_API_KEY" not in proc.env
    cmdline = proc.cmdline
    assert cmdline[cmdline.index("--api-key") + 1] == PLACEHOLDER
    assert f"--token={PLACEHOLDER}" in cmdline
    assert cmdline[cmdline.index("--db-password") + 1] == PLACEHOLDER
    last = bundle.samples[-1]
    worker_log = next(lg for lg in last.logs if lg.path == str(log))
    assert f"auth ok token={PLACEHOLDER}" in worker_log.tail
    assert f"GET /v1 Authorization: Bearer {PLACEHOLDER}" in worker_log.tail
    assert "step 1 loss 2.5" in worker_log.tail
    me = next(p for p in last.processes if p.pid == target.pid)
    names = [t.py_thread_name for t in me.threads]
    assert f"worker-{PLACEHOLDER}" in names, names
