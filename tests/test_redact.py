"""The redactor, case by case: what must go, what must stay, and JSON that stays JSON."""

from __future__ import annotations

import json
from typing import Tuple

import pytest

from diag.redaction.redact import (
    PLACEHOLDER,
    Redactor,
    is_secret_flag,
    is_secret_name,
    worth_learning,
)

R = PLACEHOLDER
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
GHP = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"

# (input, expected) for a redactor that has learned nothing.
PATTERN_CASES: Tuple[Tuple[str, str], ...] = (
    ("http://alice:pa55word@db.example:5432/x", f"http://{R}@db.example:5432/x"),
    ("git clone https://x-access-token:tok123@github.com/o/r", f"git clone https://{R}@github.com/o/r"),
    (f"https://{HF}@huggingface.co/m", f"https://{R}@huggingface.co/m"),
    ("Authorization: Bearer eyJhbGciOi.abc.def", f"Authorization: Bearer {R}"),
    ("authorization=Basic dXNlcjpwYXNz", f"authorization=Basic {R}"),
    ('hdr {"Authorization": "Bearer abcdef123456"}', f'hdr {{"Authorization": "Bearer {R}"}}'),
    ("sent bearer 0123456789abcdef", f"sent bearer {R}"),
    ("serve --api-key sk12345678 --port 30000", f"serve --api-key {R} --port 30000"),
    ("serve --api-key=abc123456 --tp 2", f"serve --api-key={R} --tp 2"),
    ("run --hf-token abcdefgh123", f"run --hf-token {R}"),
    ("run --password hunter2", f"run --password {R}"),
    ("token=abcdefgh12345 user=bob", f"token={R} user=bob"),
    ("password=hunter2, next", f"password={R}, next"),
    ("db_password: 'x'", f"db_password: '{R}'"),
    ('{"client_secret": "abc", "n": 1}', f'{{"client_secret": "{R}", "n": 1}}'),
    ("GET /x?access_token=abcdef123&page=2", f"GET /x?access_token={R}&page=2"),
    (f"login with {HF} ok", f"login with {R} ok"),
    (f"gh {GHP}", f"gh {R}"),
    ("key sk-proj-" + "Z" * 40, f"key {R}"),
    ("aws AKIAIOSFODNN7EXAMPLE", f"aws {R}"),
    ("slack xoxb-1234567890-abcdef", f"slack {R}"),
    ("jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0NTY3.SflKxwRJSMeKKF2QT4fw", f"jwt {R}"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY----- after", f"{R} after"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nxcLYBGabc\n-----END PGP PRIVATE KEY BLOCK-----", R),
    ("-----BEGIN PGP MESSAGE-----\nhQEMAabc\n-----END PGP MESSAGE-----", R),
    ("export DB_PASS=hunter22", f"export DB_PASS={R}"),
    ("run --dbPassword 'a b c' --tp 2", f"run --dbPassword '{R}' --tp 2"),
    ("https://u:pa/ss#w@host/x", f"https://{R}@host/x"),
    ("curl -u me:pw12345 https://x", f"curl -u me:{R} https://x"),
    ("mysql -u root -pPw12345 db", f"mysql -u root -p{R} db"),
    ("GET /o?X-Amz-Signature=abc123&e=1", f"GET /o?X-Amz-Signature={R}&e=1"),
    ("pay sk_live_abcdefghij12345", f"pay {R}"),
)  # fmt: skip


# Text that must survive untouched: progress counters, paths, flags that only look secret.
KEEP_CASES: Tuple[str, ...] = (
    "https://example.com/path/@user no creds",
    "run --tokenizer-path /models/tok --max-tokens 100",
    "run --disable-auth --port 80",
    "#token: 120, token usage: 0.00, gen throughput (token/s): 25.3",
    "max_tokens=512 num_tokens: 8192",
    "the task-abcdefghijklmnopqrstuvwxyz1234 ran",
    "NCCL INFO Channel 00/02 : 0 1 via P2P/IPC",
    'File "/work/train.py", line 42, in step',
    "Loading safetensors checkpoint shards: 100% 4/4 [00:03<00:00, 1.2it/s]",
)


@pytest.mark.parametrize("text", KEEP_CASES)
def test_ordinary_text_is_kept(text: str) -> None:
    assert Redactor().scrub(text) == text


@pytest.mark.parametrize(("text", "expected"), PATTERN_CASES)
def test_patterns(text: str, expected: str) -> None:
    assert Redactor().scrub(text) == expected


@pytest.mark.parametrize(("text", "_"), PATTERN_CASES)
def test_scrub_is_idempotent(text: str, _: str) -> None:
    r = Redactor()
    once = r.scrub(text)
    assert r.scrub(once) == once


def test_learned_env_values_are_scrubbed_everywhere_in_every_spelling() -> None:
    r = Redactor()
    r.add_environ(
        {
            "MY_API_KEY": 'q"w\\e<r>t&y-secret',
            "PWD": "/work/main",
            "DEBUG": "1",
            "USE_AUTH": "true",
            "SESSION_PORT": "12345",
            "GOOGLE_CREDENTIALS_FILE": "/etc/creds.json",
        }
    )
    value = 'q"w\\e<r>t&y-secret'
    assert r.scrub(f"raw {value} end") == f"raw {R} end"
    assert r.scrub("json " + json.dumps(value)) == f'json "{R}"'
    assert r.scrub("url q%22w%5Ce%3Cr%3Et%26y-secret") == f"url {R}"
    assert r.scrub("html q&#34;w\\e&lt;r&gt;t&amp;y-secret") == f"html {R}"
    # Locations, switches and numbers were not learned: paths and digits survive.
    assert r.scrub("/work/main/train.py true 12345 /etc/creds.json") == (
        "/work/main/train.py true 12345 /etc/creds.json"
    )


@pytest.mark.parametrize(
    ("value", "learned"),
    [("1", False), ("true", False), ("8080", False), ("1.5e3", False), ("abcd", False),
     ("abcde", True), ("hunter22", True), ("  spaced-secret  ", True)],
)  # fmt: skip
def test_worth_learning(value: str, learned: bool) -> None:
    assert worth_learning(value) is learned


@pytest.mark.parametrize(
    ("name", "secret"),
    [("HF_TOKEN", True), ("WANDB_API_KEY", True), ("aws_secret_access_key", True),
     ("DB_PASSWORD", True), ("GITHUB_PAT_AUTH", True), ("NCCL_DEBUG", False), ("RANK", False),
     ("MASTER_ADDR", False), ("NCCL_IB_CREDS", True), ("TORCH_DIST_PW", True),
     ("SENTRY_DSN", True), ("URL_SIG", True), ("NCCL_PWR_LIMIT", False),
     ("TORCH_SIGNAL_HANDLER", False), ("CUDA_DEVICE_MAX_CONNECTIONS", False)],
)  # fmt: skip
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("flag", "secret"),
    [("--api-key", True), ("--api_key", True), ("--apikey", True), ("--hf-token", True),
     ("--token", True), ("--password=x", True), ("--auth-token", True), ("--secret", True),
     ("--tokenizer-path", False), ("--max-tokens", False), ("--keyfile", False),
     ("--port", False), ("api-key", False), ("--dbPassword", True), ("--secretToken=x", True),
     ("--pw", True), ("--creds", True), ("--auth", True), ("--sig", True), ("--tp", False),
     ("--keep-alive", False), ("--kv-cache-dtype", False), ("--monkey", False),
     ("--passes", False), ("--tensor-parallel-size", False)],
)  # fmt: skip
def test_secret_flags(flag: str, secret: bool) -> None:
    assert is_secret_flag(flag) is secret


def test_scrub_argv_redacts_and_learns_flag_values() -> None:
    r = Redactor()
    argv = [
        "python", "-m", "sglang.launch_server", "--api-key", "argv-secret-1",
        "--token=argv-secret-2", "--tp", "2", "--tokenizer-path", "/m/tok",
        "--model", "https://u:p4ss@host/m", "--password", "--next-flag",
    ]  # fmt: skip
    out = r.scrub_argv(argv)
    assert out == (
        "python", "-m", "sglang.launch_server", "--api-key", R, f"--token={R}", "--tp", "2",
        "--tokenizer-path", "/m/tok", "--model", f"https://{R}@host/m", "--password",
        "--next-flag",
    )  # fmt: skip
    # Learned: the same values are now scrubbed from free text (a log line echoing argv).
    assert r.scrub("key argv-secret-1 and argv-secret-2") == f"key {R} and {R}"


def test_scrub_bytes_keeps_json_valid_even_when_a_secret_sits_in_a_number() -> None:
    r = Redactor()
    r.add_secret("9876543x")  # not a number, but a number's digits can surround it...
    r.add_secret("secret-in-string")
    doc = {"a": "x secret-in-string y", "n": 123, "list": ["9876543x"], "secret-in-string": 1}
    out = r.scrub_bytes(json.dumps(doc).encode())
    parsed = json.loads(out)
    assert parsed == {"a": f"x {R} y", "n": 123, "list": [R], R: 1}


def test_scrub_bytes_structural_fallback_when_text_replacement_breaks_json() -> None:
    r = Redactor()
    r.add_secret("ab\\")  # ends in a backslash: a raw match can split a JSON escape
    data = json.dumps({"k": "xab\\\\y", "n": 1}).encode()
    out = r.scrub_bytes(data)
    assert json.loads(out)["n"] == 1
    assert b"ab\\" not in out.replace(b"\\\\", b"")


def test_scrub_bytes_jsonl_stays_valid_line_by_line() -> None:
    r = Redactor()
    r.add_secret("tok-AAAA1111")
    lines = [json.dumps({"kind": "sample", "v": "tok-AAAA1111"}), json.dumps({"kind": "end"})]
    out = r.scrub_bytes(("\n".join(lines) + "\n").encode())
    parsed = [json.loads(x) for x in out.decode().splitlines()]
    assert parsed[0]["v"] == R and parsed[1] == {"kind": "end"}


def test_scrub_bytes_untouched_when_nothing_matches() -> None:
    data = b'{"a": "plain", "n": 1}'
    assert Redactor().scrub_bytes(data) is data
