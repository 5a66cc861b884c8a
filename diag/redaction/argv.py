"""Which arguments of a command line hold a secret, and where in each the secret starts.

One rule set for every place a command line shows up: a process's own argv
(``Redactor.scrub_argv``), and an argv rendered as a Python or JSON list inside text - a
traceback's ``Command '['tool', '--api-key', 'V']'``, a JSON log's ``["--password", "V"]``
(``diag.redaction.structure``). The answer is positions, not text, so each caller replaces the
value in its own spelling and keeps the rest (the flag, ``user:`` of ``user:pw``, the scheme
word of a header) for the reader.

The ``-p VALUE`` of a program diag does not know is a password only when the value reads like
one (letters and digits, or punctuation): ``-p 8000``, ``-p 8080:80``, ``-p no:cacheprovider``,
``-p /path`` and ``-p gpu`` stay, and programs whose ``-p`` is something else (ssh's port,
srun's partition, git's patch, mkdir's parents) are never touched.
"""

from __future__ import annotations

import re
import shlex
from typing import Dict, List, Optional, Sequence, Tuple

from diag.redaction.patterns import is_secret_flag, looks_secret, secret_strength
from diag.redaction.tools import (
    PASSWORD_SHORT_OPTIONS,
    POSITIONAL_SECRET_COMMANDS,
    USER_PASSWORD_OPTIONS,
    USER_PASSWORD_TOOLS,
)

# index of an argument -> offset in it where its secret starts (0: the whole argument)
Spans = Dict[int, int]

# Programs whose -p takes something other than a password (a port, a PID, a partition, a
# plugin, a project), or is a switch: the generic ``-p VALUE`` rule leaves them alone.
_P_NOT_A_PASSWORD_TOOLS = (
    "ssh scp sftp mosh mkdir cp install rsync git docker podman nerdctl kubectl ps pgrep "
    "pkill pidstat top htop xargs tar patch diff make gcc g++ cc clang nvcc ld srun sbatch "
    "salloc squeue sinfo scontrol sacct scancel strace ltrace gdb perf py-spy nsenter "
    "taskset chrt renice lsof nc ncat socat iperf iperf3 ping traceroute pytest py.test sed "
    "grep awk less unzip zip 7z openssl pip uv conda numactl nvidia-smi ray celery gunicorn "
    "uvicorn"
)
_P_IS_NOT_A_PASSWORD = frozenset(_P_NOT_A_PASSWORD_TOOLS.split())
# openssl's password arguments: ``-passin pass:PW`` (``env:VAR``, ``file:PATH`` are not).
_PASS_ARG_OPTIONS = frozenset({"-passin", "-passout", "-pass", "-passphrase"})
_HEADER_RE = re.compile(
    r"(?:--?[\w-]+=)?\s*(?:(?:proxy-)?authorization|cookie|private-token|api-key"
    r"|x-[\w-]*(?:key|token|secret|auth|signature|password)[\w-]*)\s*:\s*"
    r"(?:(?:bearer|basic|token|digest)\s+)?(?=\S)",
    re.IGNORECASE,
)
_PORTISH_RE = re.compile(r"[\d.:\[\],-]+(?:/(?:tcp|udp|sctp))?")
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z_.:-]*")


def argv_secrets(argv: Sequence[str]) -> Spans:
    """The secret spans of ``argv``: ``--flag V``, ``--flag=V``, ``NAME=V`` with a secret
    name, the password option of known tools (``mysql -pPW``, ``zip -P PW``), ``-p PW`` of
    any other program when PW reads like a password, ``curl -u user:PW``, ``wandb login KEY``,
    ``openssl -passin pass:PW``, and secret headers (``Authorization: Bearer V``)."""
    spans: Spans = {}
    tool, short, positional, user_pass = _tool_rules(argv)
    generic_p = short is None and tool not in _P_IS_NOT_A_PASSWORD
    pending: Optional[int] = None  # the next argument's secret offset, if it is a value
    for index, arg in enumerate(argv):
        if pending is not None and not arg.startswith("-"):
            spans[index] = pending
            pending = None
            continue
        pending = None
        header = _HEADER_RE.match(arg)
        if header is not None:
            spans[index] = header.end()
        elif arg.startswith("-") and is_secret_flag(arg):
            flag, eq, value = arg.partition("=")
            if eq and value:
                spans[index] = len(flag) + 1
            elif not eq:
                pending = 0
        elif short is not None and arg.startswith(short):
            if arg == short:
                pending = 0
            else:
                spans[index] = len(short)
        elif generic_p and arg == "-p" and _reads_like_password(_at(argv, index + 1)):
            pending = 0
        elif generic_p and arg.startswith("-p") and _reads_like_password(arg[2:]):
            spans[index] = 2
        elif arg in _PASS_ARG_OPTIONS and _at(argv, index + 1).startswith("pass:"):
            pending = len("pass:")
        elif user_pass and arg == "-b" and "=" in _at(argv, index + 1):
            pending = 0  # curl -b 'a=1; sid=V': every cookie (-b FILE has no '=')
        elif user_pass and arg in USER_PASSWORD_OPTIONS and _user_pass(_at(argv, index + 1)):
            pending = argv[index + 1].index(":") + 1
        elif positional is not None and index >= positional and not arg.startswith("-"):
            spans[index] = 0
        elif "=" in arg and not arg.startswith("-"):
            name, _, value = arg.partition("=")
            strength = secret_strength(name)
            if value and (strength == 2 or (strength == 1 and _reads_like_token(value))):
                spans[index] = len(name) + 1  # ``token=V``, V a token (not ``key=train``)
    return spans


# A joined command line read back into an argv: at most this long, this many words, and
# nested this deep (``sh -c "bash -c '...'"``).
MAX_JOINED_CHARS = 64 << 10
MAX_JOINED_WORDS = 4096
MAX_JOINED_DEPTH = 3


def joined_secrets(text: str, depth: int = 0) -> List[str]:
    """The secret values of a command line joined into one string: a process title rewritten
    in place (setproctitle: ``/proc/P/cmdline`` is ``worker --api-key=V token=W``), the
    command of ``sh -c 'python x.py --token V'``, ``su -c``, ``ssh host CMD``.

    Split as a shell would (quotes, ``;``/``&&`` apart) and judged by ``argv_secrets``, the
    rules of a real argv, so its values are learned like any argv's - and scrubbed wherever
    else they show up (a log line, a thread name), not only where a text pattern sees them.
    """
    if depth >= MAX_JOINED_DEPTH or not text.strip() or len(text) > MAX_JOINED_CHARS:
        return []
    words = _shell_words(text)
    found: List[str] = []
    for command in _commands(words):
        spans = argv_secrets(command)
        found += [command[i][offset:] for i, offset in spans.items() if command[i][offset:]]
        for i, word in enumerate(command):
            if i not in spans and any(c.isspace() for c in word):
                found += joined_secrets(word, depth + 1)
    return found


def _shell_words(text: str) -> List[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    words: List[str] = []
    try:
        for word in lexer:
            words.append(word)
            if len(words) >= MAX_JOINED_WORDS:
                break
    except ValueError:  # an unclosed quote (a title cut short): split on whitespace
        return text.split()[:MAX_JOINED_WORDS]
    return words


def _commands(words: List[str]) -> List[List[str]]:
    """The simple commands of a shell line (``a; b && c | d``), each an argv."""
    commands: List[List[str]] = [[]]
    for word in words:
        if word and all(c in ";&|()" for c in word):
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def _at(argv: Sequence[str], index: int) -> str:
    return argv[index] if index < len(argv) else ""


def _tool_rules(argv: Sequence[str]) -> Tuple[str, Optional[str], Optional[int], bool]:
    """What ``argv``'s program makes secret: (the program - the module of ``python -m``,
    its password short option, the index from which positional arguments are credentials,
    whether -u/--user carry ``user:password``)."""
    if not argv:
        return "", None, None, False
    tool = argv[0].rsplit("/", 1)[-1]
    if tool.startswith("python") and "-m" in argv[:-1]:
        tool = argv[argv.index("-m") + 1].split(".", 1)[0]
    with_sub = f"{tool} {argv[1]}" if len(argv) > 1 else tool
    short = PASSWORD_SHORT_OPTIONS.get(with_sub) or PASSWORD_SHORT_OPTIONS.get(tool)
    positional = 2 if with_sub in POSITIONAL_SECRET_COMMANDS else None
    return tool, short, positional, tool in USER_PASSWORD_TOOLS


def _user_pass(value: str) -> bool:
    """``-u user:PW``: the value holds a password (``1000:1000`` ids do not count)."""
    if ":" not in value or value.startswith("-"):
        return False
    return re.fullmatch(r"[\d:]+", value) is None


def _reads_like_token(value: str) -> bool:
    """The value of a weak name (``token=``, ``key=``, ``session=``) that is learned from
    argv: 12+ characters with letters and digits, as text reads it secret (``looks_secret``)
    - not a Hydra override's ``data.key=train_split`` or ``key=run1``, which learned would be
    scrubbed from every path that holds them."""
    return (
        len(value) >= 12
        and looks_secret(value)
        and re.search(r"[A-Za-z]", value) is not None
        and re.search(r"\d", value) is not None
    )


def _reads_like_password(value: str) -> bool:
    """The value of an unknown program's ``-p``: 6+ characters with letters and digits or
    punctuation - not a number, port mapping, path, plugin (``no:x``) or plain word."""
    if len(value) < 6 or value.startswith("-") or "/" in value or value[0] in "~.":
        return False
    if _PORTISH_RE.fullmatch(value) or _WORD_RE.fullmatch(value):
        return False
    has_letter = re.search(r"[A-Za-z]", value) is not None
    has_digit = re.search(r"\d", value) is not None
    return (has_letter and has_digit) or re.search(r"[^\w.:-]", value) is not None
