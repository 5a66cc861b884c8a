"""The environment probe: /proc/P/environ parsing, the allowlist, and scrubbed values."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from diag.probes.env import is_allowed, parse_environ, read_environ, select_env
from diag.probes.procfs import ProcFS
from diag.redaction.redact import PLACEHOLDER, Redactor


def test_parse_environ_nul_separated_first_wins_and_odd_bytes() -> None:
    raw = b"A=1\0B=x=y\0EMPTY=\0NOEQUALS\0A=2\0BAD=\xff\xfe\0\0"
    env = parse_environ(raw)
    assert env["A"] == "1"  # first definition wins, like getenv
    assert env["B"] == "x=y"
    assert env["EMPTY"] == ""
    assert "NOEQUALS" not in env
    assert env["BAD"] == "\ufffd\ufffd"


def test_parse_environ_empty() -> None:
    assert parse_environ(b"") == {}


def test_allowlist_shows_job_variables_and_drops_the_rest() -> None:
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_SOCKET_IFNAME": "eth0",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "8",
        "MASTER_ADDR": "10.0.0.1",
        "TP_RANK": "1",
        "SLURM_PROCID": "3",
        "SLURM_JOB_ACCOUNT": "acme",
        "OMP_NUM_THREADS": "4",
        "TOKENIZERS_PARALLELISM": "false",
        "HOME": "/root",
        "USER": "alice",
        "PATH": "/usr/bin",
        "LS_COLORS": "di=01;34",
    }
    shown = select_env(env)
    assert set(shown) == {
        "NCCL_DEBUG",
        "NCCL_SOCKET_IFNAME",
        "CUDA_VISIBLE_DEVICES",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "TP_RANK",
        "SLURM_PROCID",
        "OMP_NUM_THREADS",
        "TOKENIZERS_PARALLELISM",
    }
    assert list(shown) == sorted(shown)
    assert shown["RANK"] == "3"


def test_secret_looking_names_dropped_even_when_allowlisted() -> None:
    assert not is_allowed("NCCL_IB_SECRET_KEY")
    assert not is_allowed("TORCH_HUB_TOKEN")
    assert not is_allowed("HF_TOKEN")
    assert not is_allowed("WANDB_API_KEY")
    assert is_allowed("NCCL_DEBUG")


def test_values_are_scrubbed_with_secrets_learned_from_the_whole_environment() -> None:
    token = "hf_" + "Q" * 34
    env = {
        "HF_TOKEN": token,
        "DB_PASSWORD": "s3cr3t-pw",
        "NCCL_DEBUG_FILE_URL": "http://admin:s3cr3t-pw@10.0.0.1:9000/x",
        "TORCH_EXTRA_ARGS": f"--hub-token-file /x --id {token}",
        "MASTER_PORT": "29500",
    }
    redactor = Redactor()
    shown = select_env(env, redactor)
    assert "HF_TOKEN" not in shown and "DB_PASSWORD" not in shown
    assert shown["NCCL_DEBUG_FILE_URL"] == f"http://{PLACEHOLDER}@10.0.0.1:9000/x"
    assert token not in shown["TORCH_EXTRA_ARGS"]
    assert shown["MASTER_PORT"] == "29500"
    # The shared redactor learned the values for every later output.
    assert redactor.scrub(f"log {token} s3cr3t-pw") == f"log {PLACEHOLDER} {PLACEHOLDER}"


def test_long_values_are_cut() -> None:
    shown = select_env({"LD_LIBRARY_PATH": "/x" * 5000})
    assert len(shown["LD_LIBRARY_PATH"]) < 2100
    assert shown["LD_LIBRARY_PATH"].endswith("chars]")


def test_read_environ_of_a_real_process(spawn: Any) -> None:
    target = spawn(
        [sys.executable, "-c", "import time; print('READY', flush=True); time.sleep(60)"],
        env={"NCCL_DEBUG": "WARN", "RANK": "5", "MY_API_KEY": "planted-env-secret"},
    )
    env = read_environ(target.pid)
    assert env["RANK"] == "5" and env["MY_API_KEY"] == "planted-env-secret"
    shown = select_env(env)
    assert shown["NCCL_DEBUG"] == "WARN" and shown["RANK"] == "5"
    assert "planted-env-secret" not in repr(shown)


def test_read_environ_through_an_injected_proc_root(tmp_path: Path) -> None:
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "environ").write_bytes(b"RANK=2\0WORLD_SIZE=4\0")
    assert read_environ(42, ProcFS(tmp_path)) == {"RANK": "2", "WORLD_SIZE": "4"}
