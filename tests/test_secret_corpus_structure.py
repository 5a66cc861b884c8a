"""The planted-secret corpus, second hostile pass (issue #25): forms found to leak, and forms
they suggest. Redaction goes by structure first (key/value in JSON, YAML, INI, netrc; argv
rendered as Python or JSON lists; URLs with userinfo or a secret path), then by pattern.

Each plant runs through ``tests.test_secret_corpus.check_plant`` (the argv, text and lines
paths of one ``Redactor``), so the README's figure counts both corpora; see
``test_whole_corpus_figure``. Ordinary text that looks close (ports after ``-p``, rank numbers,
paths, image digests) must survive: ``KEEP_NEAR``.
"""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path
from typing import List, Sequence, Tuple

import pytest

from diag.redaction.redact import PLACEHOLDER, Redactor
from tests.test_secret_corpus import CORPUS, Plant, check_plant


def _tok(prefix: str = "", n: int = 10) -> str:
    return prefix + secrets.token_hex(n)


def _mixed(n: int = 24) -> str:
    """A value with upper and lower case and digits (token shapes that want both)."""
    while True:
        v = secrets.token_urlsafe(n).replace("-", "x").replace("_", "y")[:n]
        if (
            any(c.isupper() for c in v)
            and any(c.islower() for c in v)
            and any(c.isdigit() for c in v)
        ):
            return v


def _argv_plants() -> List[Plant]:
    forms: List[Tuple[str, Sequence[str]]] = [
        ("own -p V (mysql-style, no port)", ["myclient", "--host", "db", "-p", "{s}"]),
        ("own -pV glued", ["python", "client.py", "-p{s}"]),
        ("-H Authorization: Bearer V", ["curl", "-H", "Authorization: Bearer {s}", "https://x"]),
        ("--header X-Api-Key: V", ["curl", "--header", "X-Api-Key: {s}", "https://x"]),
        ("openssl -passin pass:V", ["openssl", "rsa", "-in", "k.pem", "-passin", "pass:{s}"]),
        ("zip -P V", ["zip", "-P", "{s}", "out.zip", "a.txt"]),
    ]
    out = []
    for form, template in forms:
        value = _tok("Arg9")
        argv = tuple(a.replace("{s}", value) for a in template)
        out.append(Plant("argv", f"argv {form}", (value,), argv=argv))
    return out


def _log_plants() -> List[Plant]:
    v = {k: _tok(k) for k in "abcdefghijklmnopqrstuvwxyz"}
    w = {k: _tok(k) for k in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    slack = f"T{_mixed(8).upper()}/B{_mixed(10).upper()}/{_mixed(24)}"
    discord = f"{secrets.randbelow(10**18)}/{_mixed(68)}"
    discord2 = f"{secrets.randbelow(10**18)}/{_mixed(68)}"
    discord_esc = discord2.replace("/", "\\/")
    teams = f"{_tok(n=8)}@{_tok(n=8)}/IncomingWebhook/{_tok(n=16)}/{_tok(n=8)}"
    forms = [
        # key/value structures: JSON, YAML, INI, netrc
        ('JSON {"pass": V}', json.dumps({"user": "bob", "pass": v["a"]}), (v["a"],)),
        ('JSON {"pw": V}', json.dumps({"pw": v["b"], "port": 5432}), (v["b"],)),
        ("YAML pass: V", f"db:\n  user: bob\n  pass: {v['c']}\n", (v["c"],)),
        ("YAML pw: V", f"  pw: {v['d']}", (v["d"],)),
        ("passcode=V", f"login passcode={v['e']} ok", (v["e"],)),
        ("netrc password V", f"machine api.io\n  login bob\n  password {v['f']}\n", (v["f"],)),
        ("netrc one line", f"machine h login bob password {v['g']}", (v["g"],)),
        ("netrc default", f"default login anon password {v['h']}", (v["h"],)),
        ("INI [default] AWS", f"[default]\naws_access_key_id = AKIA{_mixed(16).upper()}\n"
         f"aws_secret_access_key = {v['i']}\naws_session_token = {v['j']}\n", (v["i"], v["j"])),
        ("INI pass = V", f"[database]\nuser = bob\npass = {v['k']}\n", (v["k"],)),
        ("key=\\rV", f"api_key=\r{v['l']}", (v["l"],)),
        ("DB_PASS=\\rV", f"DB_PASS=\r{v['m']}", (v["m"],)),
        ("ANSI api_key = V", f"\x1b[36mapi_key \x1b[0m= \x1b[35m{v['n']}\x1b[0m", (v["n"],)),
        ("ANSI password: V", f"\x1b[1mpassword\x1b[22m: \x1b[33m{v['o']}", (v["o"],)),
        # argv rendered as lists (tracebacks, JSON logs)
        ("Command '[..., '--api-key', V]'",
         f"subprocess.CalledProcessError: Command '['tool', '--api-key', '{v['p']}']' "
         "returned non-zero exit status 1.", (v["p"],)),
        ('["--password", V]', f'args: ["--password", "{v["q"]}"]', (v["q"],)),
        ("['curl', '-u', 'bob:V']", f"run(['curl', '-u', 'bob:{v['r']}', 'https://x'])",
         (v["r"],)),
        ("['--token=V'] in a JSON list", json.dumps(["serve", f"--token={v['s']}"]), (v["s"],)),
        ("['-H', 'Authorization: Bearer V']",
         f"cmd=['curl', '-H', 'Authorization: Bearer {v['t']}', 'https://x']", (v["t"],)),
        ("JSON-escaped list in a JSON string",
         json.dumps({"msg": json.dumps(["app", "--secret", v["u"]])}), (v["u"],)),
        ("YAML args list", f"args:\n  - --api-key\n  - {v['v']}\n  - --port\n  - 8000\n",
         (v["v"],)),
        ("pretty JSON args list", json.dumps({"args": ["--hf-token", v["w"]]}, indent=2),
         (v["w"],)),
        ("list with mysql -p V", f"Popen(['mysql', '-u', 'root', '-p', '{v['x']}'])", (v["x"],)),
        # URLs: userinfo with escaped slashes, no scheme, URL-encoded; secret paths
        ("postgres:\\/\\/bob:V@host", f'{{"dsn": "postgres:\\/\\/bob:{v["y"]}@db\\/x"}}',
         (v["y"],)),
        ("bob:V@db:5432 (no scheme)", f"connecting to bob:{v['z']}@db:5432 ...", (v["z"],)),
        ("user:V@host/path (no scheme)", f"remote admin:{w['A']}@10.0.0.5/db", (w["A"],)),
        ("URL-encoded userinfo", f"next=https%3A%2F%2Fbob%3A{w['B']}%40h.io%2Fx", (w["B"],)),
        ("Slack webhook", f"POST https://hooks.slack.com/services/{slack} 200",
         (slack.split("/")[-1],)),
        ("Discord webhook", f"hook https://discord.com/api/webhooks/{discord}",
         (discord.split("/")[-1],)),
        ("Discord webhook, escaped slashes",
         f'"url": "https:\\/\\/discordapp.com\\/api\\/webhooks\\/{discord_esc}"',
         (discord2.split("/")[-1],)),
        ("Teams webhook", f"https://acme.webhook.office.com/webhookb2/{teams}",
         (teams.split("/")[-2],)),
        # query strings
        ("?access_token=V", f"GET /api?access_token={w['C']}&page=2", (w["C"],)),
        ("&api_key=V", f"GET /v1?q=1&api_key={w['D']}", (w["D"],)),
        ("?token=V", f"wss://h/ws?token={w['E']}", (w["E"],)),
        ("&X-Amz-Security-Token=V", f"/o?X-Amz-Security-Token={w['F']}&X-Amz-Date=1", (w["F"],)),
        ("Azure AccountKey=", f"DefaultEndpointsProtocol=https;AccountName=a;"
         f"AccountKey={w['G']}+/Ab==;EndpointSuffix=x", (w["G"],)),
        ("openssl pass:V in a log", f"$ openssl rsa -passin pass:{w['H']} -in k", (w["H"],)),
        ("Cookie header", f"-H 'Cookie: session={w['I']}'", (w["I"],)),
        ("X-Api-Key header", f"X-Api-Key: {w['J']}", (w["J"],)),
        # config files a job or its wrapper may cat into a log
        (".npmrc _authToken=", f"//registry.npmjs.org/:_authToken={w['K']}", (w["K"],)),
        ("redis://:V@host (no user)", f"REDIS_URL=redis://:{w['L']}@cache:6379/0", (w["L"],)),
        ("docker config auth", json.dumps({"auths": {"r.io": {"auth": w["M"]}}}), (w["M"],)),
        ("k8s Secret data", f"data:\n  password: {w['N']}=\n", (w["N"],)),
        (".pgpass-like PGPASSWORD=", f"PGPASSWORD={w['O']} psql -h db", (w["O"],)),
        # token shapes
        ("nvapi-", f"key nvapi-{_mixed(60)}", ()),
        ("r8_ (Replicate)", f"r8_{_mixed(37)}", ()),
        ("gsk_ (Groq)", f"GROQ gsk_{_mixed(52)}", ()),
        ("dckr_pat_", f"login dckr_pat_{_mixed(27)}", ()),
        ("hf_ inside a word boundary", f"token:hf_{_mixed(34)}", ()),
        ("ghp_ in a URL", f"https://ghp_{_mixed(36)}@github.com/o/r", ()),
    ]  # fmt: skip
    out = []
    for form, text, values in forms:
        if not values:  # a token shape: the whole token is the secret
            values = (text.split()[-1].split(":")[-1].split("//")[-1].split("@")[0],)
        out.append(Plant("log", f"log {form}", values, text=text))
    return out


STRUCTURE_CORPUS = _argv_plants() + _log_plants()


@pytest.mark.parametrize("plant", STRUCTURE_CORPUS, ids=[p.form for p in STRUCTURE_CORPUS])
def test_structured_form_is_removed(plant: Plant) -> None:
    assert not check_plant(plant)


def test_whole_corpus_figure() -> None:
    """The README's figure: planted values of both corpora, and how many leaked (0)."""
    corpus = CORPUS + STRUCTURE_CORPUS
    tried = sum(len(p.secrets) for p in corpus)
    leaked = [leak for p in corpus for leak in check_plant(p)]
    assert tried >= 160, tried
    assert leaked == [], f"{len(leaked)} of {tried} leaked: {leaked}"


# Close to the forms above, but ordinary: must survive scrubbing untouched.
KEEP_NEAR: Tuple[str, ...] = (
    "docker run -p 8080:80 -p 127.0.0.1:9000:9000/tcp img",
    "python -m pytest -p no:cacheprovider -p xdist tests",
    "compass: north  bypass: 1  passes: 3",
    "forward pass: 12.3 ms, backward pass: 45.1ms, pass: 3/10",
    'timings {"pass": 0.25, "pw": 3}',
    "pass: ok  pass=true  pass: PASSED",
    # source lines in tracebacks and prose (found by scrubbing site-packages before and after)
    "``mailto:address@example.com?cc=copy@example.com``",
    'user_pass, netloc_no_user_pass = netloc.rsplit("@", 1)',
    "# First pass: Create dict of template.uid to generator",
    "q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]",
    "pw = Piecewise((x, x < 1), (x**2, True))",
    "joint_custom_pass: Callable = None",
    "_DISABLE_ATEN_TO_ASSERTION_PASS = orig_val",
    "post_grad_custom_pre_pass: torch._inductor.custom_graph_pass.CustomGraphPassType = None",
    "if pw == -1:",
    'pw = "\\n".join(ecpairs) + elast',
    "statistics during the forward pass::",
    "Alternatively, pass :class:`NumaOptions` to ``LaunchConfig``",
    'image "python:3.11@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"',
    "git@github.com:org/repo.git",
    "rank 3: 12:30@node-7 finished",
    "['python', '-m', 'torch.distributed.run', '--nproc-per-node', '8', 'train.py']",
    '["--port", "8000", "--tp", "2", "--model", "/models/llama"]',
    "https://hooks.example.com/services/x",
    "Enter the password for user bob:",
    "machine learning rate 0.1",
    "NCCL INFO comm 0x7f00 rank 3 nranks 8 cudaDev 3 busId 1000 - Init COMPLETE",
    "Loading 50%\rLoading 100%",
    "\x1b[32mINFO\x1b[0m step 10 loss 1.25",
    "[default]\nregion = us-east-1\noutput = json",
)


@pytest.mark.parametrize("text", KEEP_NEAR)
def test_near_forms_survive(text: str) -> None:
    r = Redactor()
    assert r.scrub(text) == text
    assert r.scrub_lines(text.split("\n")) == tuple(text.split("\n"))


@pytest.mark.parametrize(
    "argv",
    [
        ("python", "serve.py", "-p", "8000"),
        ("ssh", "-p", "2222", "host"),
        ("docker", "run", "-p", "8080:80", "img"),
        ("mkdir", "-p", "/tmp/a/b"),
        ("srun", "-p", "a100-80g", "python", "train.py"),
        ("git", "log", "-p", "HEAD~3"),
        ("python", "-m", "pytest", "-p", "no:cacheprovider"),
        ("torchrun", "--nproc-per-node", "8", "train.py", "-p", "configs/run.yaml"),
    ],
)
def test_ordinary_dash_p_survives_in_argv(argv: Tuple[str, ...]) -> None:
    assert Redactor().scrub_argv(argv) == argv


def test_list_redaction_keeps_the_list_shape() -> None:
    r = Redactor()
    out = r.scrub("Command '['tool', '--api-key', 'abcdef123456', '--port', '8000']' failed")
    assert out == f"Command '['tool', '--api-key', '{PLACEHOLDER}', '--port', '8000']' failed"
    doc = json.dumps({"argv": ["x", "--password", "hunter2-x"], "n": 1})
    parsed = json.loads(r.scrub_bytes(doc.encode()))
    assert parsed == {"argv": ["x", "--password", PLACEHOLDER], "n": 1}
    # learned from the list: the same value later, alone, goes too
    assert r.scrub("echo abcdef123456") == f"echo {PLACEHOLDER}"


def test_webhook_keeps_the_host() -> None:
    out = Redactor().scrub("https://hooks.slack.com/services/T0/B0/AbCdEf123456 sent")
    assert out == f"https://hooks.slack.com/services/{PLACEHOLDER} sent"


# -- end to end: diag capture of a process planting the new forms -----------------------------

TARGET = r"""
import os, sys, time
log = sys.argv[sys.argv.index('--log-file') + 1]
with open(log, 'a') as f:
    f.write(os.environ['PLANT_SRC'][::-1].replace('\x1e', '\n') + '\n')
print('READY', flush=True)
while True:
    with open(log, 'a') as f:
        f.write('step loss 1.0\n')
    time.sleep(0.1)
"""


@pytest.mark.slow
def test_end_to_end_structured_forms_reach_no_output(spawn: object, tmp_path: Path) -> None:
    from tests.conftest import run_diag

    v = {k: _tok(k) for k in ("argvp", "json", "yaml", "netrc", "list", "pylist", "cr", "ansi")}
    v.update(nos=_tok("nos"), esc=_tok("esc"), hook=_mixed(24), long=_tok("long", 16))
    lines = [
        json.dumps({"user": "bob", "pass": v["json"]}),
        f"  pw: {v['yaml']}",
        f"machine api.io login bob password {v['netrc']}",
        f"CalledProcessError: Command '['tool', '--api-key', '{v['pylist']}']' failed",
        f'argv ["--password", "{v["list"]}"]',
        f"api_key=\r{v['cr']}",
        f"\x1b[36mapi_key \x1b[0m= \x1b[35m{v['ansi']}\x1b[0m",
        f"connect bob:{v['nos']}@db:5432",
        f'{{"dsn": "postgres:\\/\\/bob:{v["esc"]}@db\\/x"}}',
        f"POST https://hooks.slack.com/services/T0/B0/{v['hook']}",
        "x" * 390 + " " + v["argvp"] + " cut here",  # learned from argv, straddles the cut
    ]
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    log = tmp_path / "job.log"
    env = {"PLANT_SRC": "\x1e".join(lines)[::-1], "RANK": "0", "NCCL_DEBUG": "INFO"}
    argv = [sys.executable, str(script), "--log-file", str(log), "-p", v["argvp"], "--port", "8000"]
    target = spawn(argv, env=env)  # type: ignore[operator]
    out = tmp_path / "out"
    out.mkdir()
    result = run_diag(
        ["capture", "--pid", str(target.pid), "--count", "2", "--interval", "0.3",
         "-o", str(out / "run"), "--log", str(log)],
        cwd=out,
    )  # fmt: skip
    assert result.returncode in (0, 10), result.stderr
    files = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert {"run.json", "run.html", "run.md"} <= set(files), sorted(files)
    leaks = [
        f"{k} in {name}" for name, data in files.items() for k, s in v.items() if s.encode() in data
    ]
    for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        leaks += [f"{k} in {stream}" for k, s in v.items() if s in text]
    assert not leaks, leaks
    bundle = files["run.json"].decode()
    assert "step loss 1.0" in bundle and "--port" in bundle and "8000" in bundle  # not vacuous
    assert "CalledProcessError" in bundle and "hooks.slack.com" in bundle and "machine" in bundle


def test_scrub_is_idempotent_and_json_stays_json_over_the_structured_corpus() -> None:
    texts = [p.text for p in STRUCTURE_CORPUS if p.text]
    r = Redactor()
    for text in texts:
        once = r.scrub(text)
        assert r.scrub(once) == once, text
    doc = {"lines": texts, "argv": [list(p.argv) for p in STRUCTURE_CORPUS if p.argv], "n": 1}
    out = r.scrub_bytes(json.dumps(doc).encode()).decode()
    assert json.loads(out)["n"] == 1 and len(json.loads(out)["lines"]) == len(texts)
    # The last pass alone (a value that reached a file unscrubbed) sees each text JSON-escaped:
    # it still catches every form but those escaped twice or spread over the lines of one
    # string (a YAML/pretty-JSON argv list) - which the source scrub (lines) catches.
    alone = [p for p in STRUCTURE_CORPUS if p.form not in _SOURCE_ONLY]
    leaked = [p.form for p in alone for s in p.secrets if s in out]
    assert not leaked, leaked


_SOURCE_ONLY = {
    "log JSON-escaped list in a JSON string",
    "log YAML args list",
    "log pretty JSON args list",
    "log postgres:\\/\\/bob:V@host",
    "log Discord webhook, escaped slashes",
}
