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


PEM_BODY = tuple(
    f"PlantedPemBody{word}OfTheKeyBlockAbcdefghijklmnopqrstuvwxyz0123456"
    for word in ("One", "Two", "Six")
)


def test_pem_block_in_a_log_absent_from_every_output(spawn, tmp_path: Path) -> None:
    """A private key logged over several lines, captured with ``--log``: no line of its body
    reaches run.json / .html / .md (each line alone reads like any base64)."""
    log = tmp_path / "job.log"
    log.write_text(
        "loading key\n-----BEGIN RSA PRIVATE KEY-----\n"
        + "".join(line + "\n" for line in PEM_BODY)
        + "-----END RSA PRIVATE KEY-----\nserving on :8000\n"
    )
    prog = spawn(["sh", "-c", "echo READY; exec sleep 600"])
    out = tmp_path / "run.json"
    proc = run_diag(
        ["capture", "--pid", str(prog.pid), "--count", "1", "-o", str(out), "--log", str(log)]
    )
    assert proc.returncode == 0, proc.stderr
    written = [tmp_path / f"run.{ext}" for ext in ("json", "html", "md")]
    assert all(path.exists() for path in written)
    assert "serving on :8000" in out.read_text()  # the log was read
    for path in written:
        text = path.read_text(errors="replace")
        for body in PEM_BODY:
            assert body not in text, f"PEM body line leaked into {path.name}"
    assert not any(body in proc.stdout + proc.stderr for body in PEM_BODY)


def test_capture_outcome_carries_the_capture_redactor(spawn, tmp_path: Path) -> None:
    """The verdict line and notes are scrubbed with what the capture learned (the bundle keeps
    no environment values to teach a fresh redactor)."""
    from diag.commands.capture import run_capture
    from diag.commands.outcome import report_outcome

    secret = SECRETS["env"]
    prog = spawn(["sh", "-c", "echo READY; exec sleep 600"], env={"HF_TOKEN": secret})
    outcome = run_capture(prog.pid, interval_s=0.1, count=1, out=str(tmp_path / "run.json"))
    assert outcome.redactor is not None
    assert secret not in outcome.redactor.scrub(f"token {secret}")
    lines: list = []
    noted = outcome._replace(notes=(f"a note naming {secret}",))
    report_outcome(noted, merged=False, fail_states=frozenset(), out=lines.append, err=lines.append)
    assert lines and not any(secret in line for line in lines), lines
