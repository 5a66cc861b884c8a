"""A corpus of planted secrets: every form must be gone, ordinary diagnostics must stay.

Two levels. The unit level feeds each planted form to the place of ``Redactor`` that handles
its source - an environment (``add_environ`` + ``select_env``), an argv (``scrub_argv``), log
text (``scrub`` and ``scrub_lines``), names (thread names, process titles, file paths, scrubbed
as text) - and asserts that no planted value survives, in the scrubbed output nor in free text
that echoes it afterwards. The end-to-end level plants a sample of the same forms in a real
process (env, argv, thread names, its /proc comm, log lines with a PEM block) and asserts that
no value reaches run.json, run.html, run.md or diag's stdout/stderr.

Values are random per run (``secrets``), so a pass cannot come from a hard-coded string.
"""

from __future__ import annotations

import base64
import os
import secrets
import sys
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import pytest

from diag.probes.env import select_env
from diag.redaction.redact import PLACEHOLDER, Redactor
from tests.conftest import run_diag


def _tok(prefix: str = "", n: int = 10) -> str:
    return prefix + secrets.token_hex(n)


def _b64_line(nbytes: int = 48) -> str:
    """A base64 body line (64 columns for 48 bytes) with upper and lower case and digits."""
    while True:
        line = base64.b64encode(os.urandom(nbytes)).decode()
        kinds = (str.isupper, str.islower, str.isdigit)
        if all(any(kind(c) for c in line) for kind in kinds):
            return line


class Plant(NamedTuple):
    """One planted form: where it sits and the values that must not survive."""

    where: str  # env | argv | log | lines | thread | title | path
    form: str
    secrets: Tuple[str, ...]
    text: str = ""
    env: Optional[Dict[str, str]] = None
    argv: Optional[Tuple[str, ...]] = None


def _pem(kind: str) -> Tuple[str, Tuple[str, ...]]:
    body = [_b64_line() for _ in range(3)] + [_b64_line(20)]
    block = "\n".join([f"-----BEGIN {kind}-----", *body, f"-----END {kind}-----"])
    return block, tuple(body)


def build_corpus() -> List[Plant]:
    """Every planted form (fresh random values each call)."""
    c: List[Plant] = []
    # -- environments: secret names, including allowlisted prefixes ------------------------
    for name in (
        "HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "DB_PASS",
        "MYSQL_PWD", "NCCL_IB_CREDS", "TORCH_DIST_PW", "MASTER_PASSWD", "VLLM_API_KEY",
        "SGLANG_AUTH_TOKEN", "GITHUB_PAT_AUTH", "SENTRY_DSN", "CUDA_LICENSE_SIG",
        "OMP_SECRET", "AZURE_STORAGE_CREDS", "SESSION_COOKIE", "PRIVATE_KEY_PEM",
    ):  # fmt: skip
        value = _tok(name.lower()[:4])
        c.append(Plant("env", f"env {name}", (value,), env={name: value, "RANK": "0"}))
    url_pw = _tok("urlpw")
    c.append(
        Plant(
            "env",
            "env NCCL value with user:pass@",
            (url_pw,),
            env={"NCCL_RAS_ADDR": f"http://u:{url_pw}@10.0.0.9:99"},
        )
    )
    # -- argv -----------------------------------------------------------------------------
    argv_forms: List[Tuple[str, Sequence[str], int]] = [
        ("--api-key X", ["python", "serve.py", "--api-key", "{s}"], 1),
        ("--api-key=X", ["python", "serve.py", "--api-key={s}"], 1),
        ("--dbPassword X", ["java", "-jar", "a.jar", "--dbPassword", "{s}"], 1),
        ("--secretToken=X", ["node", "a.js", "--secretToken={s}"], 1),
        ("--pw X", ["tool", "--pw", "{s}"], 1),
        ("--creds X", ["tool", "--creds", "{s}"], 1),
        ("--auth X", ["tool", "--auth", "{s}"], 1),
        ("--hf_token X", ["python", "t.py", "--hf_token", "{s}"], 1),
        ("--client-secret X", ["python", "t.py", "--client-secret", "{s}"], 1),
        ("-e DB_PASS=X", ["docker", "run", "-e", "DB_PASS={s}", "img"], 1),
        ("--env DB_PASS=X", ["docker", "run", "--env", "API_SECRET={s}", "img"], 1),
        ("--env=NAME=X", ["podman", "run", "--env=MY_PW={s}", "img"], 1),
        ("mysql -pX", ["mysql", "-u", "root", "-p{s}", "db"], 1),
        ("mysql -p X", ["mysqldump", "-u", "root", "-p", "{s}", "db"], 1),
        ("mongo -p X", ["mongosh", "--host", "h", "-u", "u", "-p", "{s}"], 1),
        ("redis-cli -a X", ["redis-cli", "-h", "r", "-a", "{s}", "ping"], 1),
        ("sshpass -p X", ["sshpass", "-p", "{s}", "ssh", "host"], 1),
        ("docker login -p X", ["docker", "login", "-u", "me", "-p", "{s}", "reg.io"], 1),
        ("wandb login X", ["wandb", "login", "{s}"], 1),
        ("huggingface-cli login --token X", ["huggingface-cli", "login", "--token", "{s}"], 1),
        ("curl -u user:X", ["curl", "-u", "me:{s}", "https://x.io"], 1),
        ("URL password with / and #", ["git", "clone", "https://me:{s}/a#b@git.io/r"], 1),
        ("--password 'a b c'", ["tool", "--password", "{s} two words"], 1),
    ]
    for form, template, _ in argv_forms:
        value = _tok("arg")
        argv = tuple(a.replace("{s}", value) for a in template)
        c.append(Plant("argv", f"argv {form}", (value,), argv=argv))
    # -- log lines (pattern-only: nothing learned) ---------------------------------------
    v = {k: _tok(k) for k in "abcdefghijklmnopqrstuvwxyz"}
    log_forms = [
        ("export DB_PASS=X", f"+ export DB_PASS={v['a']}", v["a"]),
        ("pass=X", f"connecting pass={v['b']} host=db", v["b"]),
        ("?sig=X (Azure SAS)", f"GET https://a.blob.io/c?sv=1&sig={v['c']}&se=2", v["c"]),
        ("X-Goog-Signature=", f"url https://gcs.io/b/o?X-Goog-Signature={v['d']}&x=1", v["d"]),
        ("X-Amz-Signature=", f"PUT /o?X-Amz-Credential=AKIA/x&X-Amz-Signature={v['e']}", v["e"]),
        ("Signature= in a query", f"fetch https://cdn.io/x?Expires=1&Signature={v['f']}", v["f"]),
        ("sk_live_", f"stripe key sk_live_{v['g']}", "sk_live_" + v["g"]),
        ("sk_test_", f"stripe sk_test_{v['h']} in test", "sk_test_" + v["h"]),
        ("rk_live_", f"restricted rk_live_{v['i']}", "rk_live_" + v["i"]),
        ("URL password with / #", f"clone https://me:{v['j']}/x#y@git.io/r ok", v["j"]),
        ("curl -u user:pw", f"$ curl -sS -u admin:{v['k']} https://api.io", v["k"]),
        ("mysql -pPW", f"$ mysql -h db -u root -p{v['l']} shop", v["l"]),
        ("mysql -p PW", f"$ mysql -u root -p {v['m']} shop", v["m"]),
        ("wandb login KEY", f"$ wandb login {v['n']}", v["n"]),
        ("huggingface-cli login --token X", f"$ huggingface-cli login --token {v['o']}", v["o"]),
        ("--dbPassword X", f"args: --dbPassword {v['p']} --tp 2", v["p"]),
        ("--secretToken=X", f"args: --secretToken={v['q']}", v["q"]),
        ("--pw/--creds/--auth", f"cli --pw {v['r']} --creds {v['s']} --auth {v['t']}", v["r"]),
        ("--env DB_PASS=", f"docker run --env DB_PASS={v['u']} -e API_TOKEN={v['v']} img", v["u"]),
        ("--password \"a b c\"", f'run --password "{v["w"]} b c" --port 1', v["w"]),
        ("password: 'a b'", f"config password: '{v['x']} with space'", v["x"]),
        ("DB_PASSWORD=\"a b\"", f'DB_PASSWORD="{v["y"]} z"', v["y"]),
        ("Bearer", f"Authorization: Bearer {v['z']}", v["z"]),
    ]  # fmt: skip
    for form, text, value in log_forms:
        c.append(Plant("log", f"log {form}", (value,), text=text))
    extra = {k: _tok(k) for k in ("tok", "cookie", "hf", "sess", "redis")}
    c += [
        Plant("log", "log -e API_TOKEN= (weak name)", (v["v"],), text=f"-e API_TOKEN={v['v']}"),
        Plant("log", "log --creds", (v["s"],), text=f"--creds {v['s']}"),
        Plant("log", "log --auth", (v["t"],), text=f"--auth {v['t']}"),
        Plant("log", "log redis-cli -a", (extra["redis"],), text=f"redis-cli -a {extra['redis']}"),
        Plant("log", "log token= long value", (extra["tok"],), text=f"token={extra['tok']}"),
        Plant("log", "log Cookie:", (extra["cookie"],), text=f"cookie: {extra['cookie']}"),
        Plant("log", "log hf_ shape", ("hf_" + extra["hf"],), text=f"loaded hf_{extra['hf']}"),
        Plant("log", "log session_id=", (extra["sess"],), text=f"session_id={extra['sess']}"),
    ]
    c += _cookie_plants()
    c += _wrapped_plants()
    for kind in ("RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PGP PRIVATE KEY BLOCK", "PGP MESSAGE"):
        block, body = _pem(kind)
        c.append(Plant("lines", f"log lines: {kind} block", body, text=f"key:\n{block}\nafter"))
    block, body = _pem("EC PRIVATE KEY")
    lines = block.split("\n")
    c.append(
        Plant("lines", "log lines: tail starts inside a block", body, text="\n".join(lines[2:]))
    )
    c.append(
        Plant("lines", "log lines: head ends inside a block", body[:2], text="\n".join(lines[:3]))
    )
    c.append(Plant("log", "one text: PEM block", body, text=f"x {block} y"))
    # -- thread names, process titles, file paths -----------------------------------------
    learned = _tok("envsecret", 12)
    c += [
        Plant("thread", "thread name with learned env value", (learned,),
              text=f"worker-{learned}", env={"MY_API_KEY": learned}),
        Plant("thread", "thread name with hf_ token", ("hf_" + v["a"],), text=f"dl-hf_{v['a']}"),
        Plant("thread", "thread name with key=value", (v["b"],), text=f"conn pass={v['b']}"),
        Plant("title", "comm: 15-char cut of a learned value", (learned[:15],),
              text=learned[:15], env={"MY_SECRET": learned}),
        Plant("title", "process title pw=", (v["c"],), text=f"pw={v['c']}"),
        Plant("title", "setproctitle with --api-key", (v["d"],), text=f"server --api-key {v['d']}"),
        Plant("path", "file path with a learned value", (learned,),
              text=f"/tmp/{learned}/run.log", env={"SESSION_TOKEN": learned}),
        Plant("path", "file path with token=", (v["e"],), text=f"/logs/run-token={v['e']}.log"),
        Plant("path", "file path with sk_live_", ("sk_live_" + v["f"],),
              text=f"/keys/sk_live_{v['f']}/x"),
    ]  # fmt: skip
    return c


def _cookie_plants() -> List[Plant]:
    """Every cookie of a header, whatever its name (issue 32): not only ``session=``."""
    k = {n: _tok(n) for n in ("theme", "xsrf", "ga", "sid", "set", "json", "enc", "curl", "b")}
    return [
        Plant("log", "log Cookie: every cookie", (k["theme"], k["xsrf"], k["ga"], k["sid"]),
              text=f'Cookie: a=1; theme={k["theme"]}; _xsrf={k["xsrf"]}|{k["ga"]}; '
                   f'sid="{k["sid"]}"'),
        Plant("log", "log Set-Cookie:", (k["set"],),
              text=f"< set-cookie: prefs={k['set']}; Path=/; Expires=Wed, 21 Oct 2026; Secure"),
        Plant("log", "log headers dict Cookie", (k["json"],),
              text=f"headers={{'Host': 'x', 'Cookie': 'lang=en; uid={k['json']}'}}"),
        Plant("log", "log URL-encoded Cookie", (k["enc"],),
              text=f"GET /echo?h=Cookie%3A%20a%3D1%3B%20uid%3D{k['enc']} 200"),
        Plant("log", "log curl -b", (k["curl"],), text=f"$ curl -sS -b 'pref={k['curl']}' x.io"),
        Plant("argv", "argv curl -b", (k["b"],), argv=("curl", "-b", f"uid={k['b']}; a=1", "x")),
        Plant("argv", "argv -H Cookie:", (k["b"],),
              argv=("curl", "-H", f"Cookie: a=1; uid={k['b']}", "https://x.io")),
    ]  # fmt: skip


def _wrapped_plants() -> List[Plant]:
    """Secrets a line break splits (issue 32): a key and its value on two lines, a token
    wrapped at a terminal's width."""
    k = {n: _tok(n, 16) for n in ("bearer", "flag", "pw", "sess")}
    wrap = "hf_" + secrets.token_hex(40)
    return [
        Plant("lines", "lines: Authorization: Bearer / token", (k["bearer"],),
              text=f"Authorization: Bearer\n{k['bearer']}\nnext"),
        Plant("lines", "lines: --api-key / value", (k["flag"],),
              text=f"cmd --port 1 --api-key\n{k['flag']}"),
        Plant("lines", "lines: password: / indented value", (k["pw"],),
              text=f"password:\n    {k['pw']}\nok"),
        Plant("lines", "lines: session_id= / value", (k["sess"],),
              text=f"session_id=\n{k['sess']}"),
        Plant("lines", "lines: hf_ token wrapped at 40 columns", (wrap[5:35], wrap[35:75]),
              text=f"key: {wrap[:35]}\n{wrap[35:75]}\n{wrap[75:]} ok"),
    ]  # fmt: skip


# Ordinary diagnostic text that must survive every pass untouched.
KEEP: Tuple[str, ...] = (
    "NCCL_DEBUG=INFO",
    "MASTER_ADDR=10.0.0.1 MASTER_PORT=29500",
    "python -m sglang.launch_server --tensor-parallel-size 2 --port 8000 --tp 2",
    "vllm serve m --kv-cache-dtype fp8 --max-tokens 100 --tokenizer-path /m/tok",
    "--keep-alive 5 --monkey patch --passes 3 --sigma 0.5",
    "GET https://example.com/api/v1/models?page=2&limit=10",
    "https://host:8443/path@v2 ok",
    "torch.distributed.all_reduce (/usr/lib/python3/site-packages/torch/distributed.py:2050)",
    'File "/work/train.py", line 42, in step',
    "killed by sig=9 after 30 s",
    "python -u train.py:main",
    "docker run -u 1000:1000 img",
    "psql -h db -p 5432 -U reader",
    "#token: 120, token usage: 0.00",
    "sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "compass=north bypass=1 monkey=2",
    "TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=8",
    "loaded 3 cookies from the jar, cookies: 3",
    "curl -b cookies.txt https://example.com/health",
)


def _leaks(plant: Plant, out: str) -> List[str]:
    return [f"{plant.form}: {s[:12]}..." for s in plant.secrets if s in out]


def check_plant(plant: Plant) -> List[str]:
    """Run one plant through the redactor path of its source; return what leaked."""
    r = Redactor()
    leaks: List[str] = []
    if plant.env is not None:
        shown = select_env(plant.env, r)
        leaks += _leaks(plant, repr(shown))
    if plant.argv is not None:
        leaks += _leaks(plant, repr(r.scrub_argv(plant.argv)))
        leaks += _leaks(plant, r.scrub("echo " + " ".join(plant.argv)))  # learned from argv
    if plant.text:
        leaks += _leaks(plant, r.scrub(plant.text))
        leaks += _leaks(plant, "\n".join(r.scrub_lines(plant.text.split("\n"))))
    if plant.env is not None and not plant.text:
        leaks += _leaks(plant, r.scrub(f"log echo {list(plant.env.values())}"))
    return leaks


CORPUS = build_corpus()


def test_corpus_is_large_and_covers_every_source() -> None:
    assert len(CORPUS) >= 60, len(CORPUS)
    assert {p.where for p in CORPUS} == {"env", "argv", "log", "lines", "thread", "title", "path"}


@pytest.mark.parametrize("plant", CORPUS, ids=[p.form for p in CORPUS])
def test_planted_form_is_removed(plant: Plant) -> None:
    assert not check_plant(plant)


def test_no_planted_value_survives_the_whole_corpus() -> None:
    """The figure the README quotes: N planted values tried, M leaked (must be 0)."""
    tried = sum(len(p.secrets) for p in CORPUS)
    leaked = [leak for p in CORPUS for leak in check_plant(p)]
    assert tried >= 60
    assert leaked == [], f"{len(leaked)} of {tried} leaked: {leaked}"


@pytest.mark.parametrize("text", KEEP)
def test_ordinary_diagnostics_survive(text: str) -> None:
    r = Redactor()
    assert r.scrub(text) == text
    assert r.scrub_lines([text, text]) == (text, text)


def test_ordinary_argv_survives() -> None:
    argv = (
        "python", "-u", "-m", "sglang.launch_server", "--tensor-parallel-size", "2",
        "--port", "8000", "--kv-cache-dtype", "fp8", "--keep-alive", "5", "--model",
        "https://example.com/m",
    )  # fmt: skip
    assert Redactor().scrub_argv(argv) == argv


def test_ordinary_env_survives() -> None:
    env = {"NCCL_DEBUG": "INFO", "MASTER_ADDR": "10.0.0.1", "RANK": "3", "NCCL_IB_HCA": "mlx5"}
    assert select_env(env) == env


def test_block_lines_keep_the_line_count_and_the_lines_around() -> None:
    block, _ = _pem("RSA PRIVATE KEY")
    lines = ["before", *block.split("\n"), "after"]
    out = Redactor().scrub_lines(lines)
    assert len(out) == len(lines)
    assert out[0] == "before" and out[-1] == "after"
    assert set(out[1:-1]) == {PLACEHOLDER}


def test_scrub_bytes_removes_a_block_split_over_a_json_list() -> None:
    """The last pass: a log tail in a JSON bundle, BEGIN kept but END cut off."""
    import json

    block, body = _pem("PRIVATE KEY")
    doc = {"tail": ["x", *block.split("\n")[:-1]], "n": 1}
    out = Redactor().scrub_bytes(json.dumps(doc).encode()).decode()
    assert json.loads(out)["n"] == 1
    assert not any(line in out for line in body)


# -- end to end -------------------------------------------------------------------------------

TARGET = r"""
import base64, os, sys, threading, time
log_path = sys.argv[sys.argv.index('--log-file') + 1]
pem = os.environ['PLANT_PEM_SRC'][::-1]
with open(log_path, 'a') as f:
    for line in os.environ['PLANT_LOG_SRC'][::-1].split("\x1e"):
        f.write(line + '\n')
    f.write('private key follows\n' + pem + '\n')
    f.write('step 1 loss 2.5\n')
stop = threading.Event()
names = os.environ['PLANT_THREADS_SRC'][::-1].split("\x1e")
for name in names:
    threading.Thread(target=stop.wait, name=name, daemon=True).start()
with open('/proc/self/comm', 'w') as comm:
    comm.write(os.environ['PLANT_COMM_SRC'][::-1])
others = sys.argv[sys.argv.index('--also-log') + 1:sys.argv.index('--also-log') + 3]
print('READY', flush=True)
step = 0
while True:  # keep writing: a growing log names its file in the verdict line
    step += 1
    for path in [log_path] + others:
        with open(path, 'a') as f:
            f.write('step %d loss 1.0\n' % step)
    time.sleep(0.1)
"""


def _pack(items: Sequence[str]) -> str:
    """Join with RS (an environment cannot hold NUL) and reverse, so the target's environment
    does not hold the value: diag must catch it by shape in the log or thread name, not as a
    learned env value."""
    return "\x1e".join(items)[::-1]


@pytest.mark.slow
def test_end_to_end_no_planted_secret_reaches_any_output(spawn: Any, tmp_path: Path) -> None:
    env_plant = {
        "HF_TOKEN": "hf_" + secrets.token_hex(17),
        "DB_PASS": _tok("dbpass"),
        "NCCL_IB_CREDS": _tok("ncclcreds"),
        "TORCH_DIST_PW": _tok("torchpw"),
        "MY_SECRET": _tok("mysecret", 12),
        "SENTRY_DSN": _tok("dsn"),
    }
    argv_plant = {k: _tok(k) for k in ("apikey", "dbpw", "sectok", "pw", "creds", "auth", "quoted")}
    log_plant = {k: _tok(k) for k in ("export", "pass", "sig", "goog", "amz", "curl", "mysql")}
    log_plant["stripe"] = "sk_live_" + secrets.token_hex(12)
    log_plant["wandb"] = secrets.token_hex(20)
    log_plant["urlpw"] = _tok("urlpw")
    thread_plant = {"thread_hf": "hf_" + secrets.token_hex(15), "thread_pw": _tok("threadpw")}
    block, pem_body = _pem("OPENSSH PRIVATE KEY")
    log_lines = [
        f"+ export DB_PASS={log_plant['export']}",
        f"db connect pass={log_plant['pass']} host=db",
        f"GET https://a.blob.core.windows.net/c?sv=1&sig={log_plant['sig']}&se=2",
        f"url https://storage.googleapis.com/b?X-Goog-Signature={log_plant['goog']}&e=1",
        f"PUT /o?X-Amz-Signature={log_plant['amz']}",
        f"$ curl -u admin:{log_plant['curl']} https://api.io",
        f"$ mysql -u root -p{log_plant['mysql']} shop",
        f"billing {log_plant['stripe']}",
        f"$ wandb login {log_plant['wandb']}",
        f"clone https://me:{log_plant['urlpw']}/a#b@git.io/r",
        "title \x1b]0;pwned\x07 and clipboard \x1b]52;c;SGVsbG8=\x07 end",
    ]
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    run_dir = tmp_path / "logs"
    run_dir.mkdir()
    log = run_dir / "worker.log"
    osc_log = run_dir / "osc-\x1b]52;c;SGVsbG8=\x07-\x1b[2J.log"
    heading_log = run_dir / "x\n## verdict: PROGRESSING - close this ticket"
    comm = env_plant["MY_SECRET"][:15]  # /proc/P/comm holds 15 characters
    env = {
        **env_plant,
        "NCCL_DEBUG": "INFO",
        "MASTER_ADDR": "10.0.0.1",
        "RANK": "0",
        "PLANT_LOG_SRC": _pack(log_lines),
        "PLANT_PEM_SRC": block[::-1],
        "PLANT_THREADS_SRC": _pack(
            [
                f"dl-{thread_plant['thread_hf']}",
                f"conn pass={thread_plant['thread_pw']}",
                f"worker-{env_plant['MY_SECRET']}",
                "osc-\x1b]52;c;SGVsbG8=\x07-\x1b]0;title\x07",
            ]
        ),
        "PLANT_COMM_SRC": comm[::-1],
    }
    argv = [
        sys.executable, "-u", str(script), "--log-file", str(log),
        "--api-key", argv_plant["apikey"], "--dbPassword", argv_plant["dbpw"],
        f"--secretToken={argv_plant['sectok']}", "--pw", argv_plant["pw"],
        "--creds", argv_plant["creds"], "--auth", argv_plant["auth"],
        "--password", f"{argv_plant['quoted']} b c",
        "--tensor-parallel-size", "2", "--port", "8000",
        "--also-log", str(osc_log), str(heading_log),
    ]  # fmt: skip
    target = spawn(argv, env=env)
    out = tmp_path / "out"
    out.mkdir()
    result = run_diag(
        [
            "capture", "--pid", str(target.pid), "--count", "2", "--interval", "0.5",
            "-o", str(out / "run"), "--log", str(log), "--log", str(osc_log),
            "--log", str(heading_log),
        ],
        cwd=out,
    )  # fmt: skip
    assert result.returncode in (0, 10), result.stderr
    files = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert {"run.json", "run.html", "run.md"} <= set(files), sorted(files)

    planted = {**env_plant, **argv_plant, **log_plant, **thread_plant, "comm": comm}
    planted.update({f"pem{i}": line for i, line in enumerate(pem_body)})
    leaks = [
        f"{name} in {fname}"
        for fname, data in files.items()
        for name, value in planted.items()
        if value.encode() in data
    ]
    for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        leaks += [f"{name} in diag {stream}" for name, value in planted.items() if value in text]
        # Terminal safety: no escape sequence or control character from the target, raw.
        assert "\x1b" not in text and "\x07" not in text, (stream, text)
    assert not leaks, leaks
    # Not vacuous: the verdict line named the log whose file name holds the sequences.
    assert "osc-\\x1b]52;c;" in result.stdout, result.stdout

    # Not vacuous: the capture saw the places the secrets were planted.
    bundle_text = files["run.json"].decode()
    assert "--tensor-parallel-size" in bundle_text and "NCCL_DEBUG" in bundle_text
    assert "step 1 loss 2.5" in bundle_text and "worker.log" in bundle_text
    # A log file name cannot forge a heading in the ticket.
    md = files["run.md"].decode()
    assert not any(line.lstrip().startswith("## verdict") for line in md.splitlines()), md
    assert "\x1b" not in md and "\x07" not in md


def test_ordinary_lines_survive_read_across_their_breaks() -> None:
    """Every break of ordinary lines is read joined (``join_wrapped``): nothing changes."""
    lines = [*KEEP, "step 1 loss 2.5", "monkey=2", "compass=north", "token: 120"]
    assert Redactor().scrub_lines(lines) == tuple(lines)
    assert Redactor().scrub("\n".join(lines)) == "\n".join(lines)
