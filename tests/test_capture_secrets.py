"""Planted secrets never reach any file ``diag capture`` writes (JSON, HTML, Markdown)."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import PROGRAMS, run_diag

SECRETS = {
    "env": "hf_PlantedEnvSecret0123456789",
    "password": "Pl4nted-DB-passw0rd!",
    "argv": "sk-PlantedApiKeyValue987654321",
    "url_pass": "urlPl4ntedPass",
    "log": "LogPl4ntedTokenValue55",
    "bearer": "zq8Vb3KwLmP0aXyT7rNs2dUf",
}


def test_planted_secrets_absent_from_every_output(spawn, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    prog = spawn(
        [
            sys.executable,
            str(PROGRAMS / "secret_server.py"),
            "--api-key",
            SECRETS["argv"],
            "--db",
            f"postgres://admin:{SECRETS['url_pass']}@db.internal:5432/x",
            "--log-file",
            str(log),
            "--log-token",
            SECRETS["log"],
        ],
        env={"HF_TOKEN": SECRETS["env"], "DB_PASSWORD": SECRETS["password"], "RANK": "0"},
    )
    out = tmp_path / "capture.json"
    proc = run_diag(
        [
            "capture",
            "--pid",
            str(prog.pid),
            "--interval",
            "0.2",
            "--count",
            "2",
            "-o",
            str(out),
            "--log",
            str(log),
        ]
    )
    assert proc.returncode == 0, proc.stderr
    written = [p for p in tmp_path.iterdir() if p.name.startswith("capture.")]
    assert out in written
    for path in written:
        text = path.read_text(errors="replace")
        for where, secret in SECRETS.items():
            assert secret not in text, f"{where} secret leaked into {path.name}"
    for stream in (proc.stdout, proc.stderr):
        assert not any(secret in stream for secret in SECRETS.values())
    bundle_text = out.read_text()
    assert "server.log" in bundle_text and "--api-key" in bundle_text  # the data is there
