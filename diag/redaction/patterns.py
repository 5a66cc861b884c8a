"""What looks secret: variable names, flags, values, and secret-shaped text.

The rules ``diag.redaction.redact.Redactor`` applies, kept apart from the machinery that applies
them (learning values, scrubbing text and files, keeping JSON valid) because they are what a
reviewer audits and what changes when a new token format appears: one table of
(pattern, replacement) pairs for free text, each with a cheap "needle" that must occur before
the costly case-insensitive pattern is run, and the predicates that decide which environment
variables and command-line flags carry credentials.
"""

from __future__ import annotations

import functools
import re
from typing import FrozenSet, List, Match, Pattern, Tuple

from diag.redaction.headers import COOKIE_PATTERNS
from diag.redaction.shapes import PLACEHOLDER as PLACEHOLDER
from diag.redaction.shapes import SHAPE_PATTERNS, Needle, Replacement
from diag.redaction.tools import PASSWORD_SHORT_OPTIONS, POSITIONAL_SECRET_COMMANDS

MIN_SECRET_CHARS = 5

# Environment variable names that look secret (the documented rule, case-insensitive substring),
# plus the short words that are only safe to match whole (``_words``): ``DB_PW``, ``AWS_CREDS``,
# ``URL_SIG`` - a substring ``PW``/``SIG`` would also hit ``..._PWR`` or ``SIGNAL``.
SECRET_NAME_RE = re.compile(
    r"TOKEN|SECRET|PASS|PWD|KEY|CREDENTIAL|AUTH|COOKIE|PRIVATE|SESSION", re.IGNORECASE
)
_SECRET_NAME_WORDS = frozenset({"pw", "cred", "creds", "sig", "signature", "dsn", "bearer"})
# Names that match the rule but whose values are locations or switches, not secrets: learning
# PWD=/work would scrub every path under /work from the report.
NOT_SECRET_VALUE_NAMES = frozenset(
    {
        "PWD",
        "OLDPWD",
        "SSH_AUTH_SOCK",
        "XAUTHORITY",
        "TOKENIZERS_PARALLELISM",
        "DBUS_SESSION_BUS_ADDRESS",
        "SESSION_MANAGER",
        "GPG_AGENT_INFO",
    }
)
LOCATION_SUFFIXES = ("_FILE", "_PATH", "_DIR", "_SOCK", "_SOCKET", "_FILENAME", "_HOME")
_TRIVIAL_VALUES = frozenset(
    {"true", "false", "yes", "no", "on", "off", "none", "null", "nil", "unset", "enabled"}
)

# Name words (``_words``: split on - _ . and camelCase) that make a value secret whatever it
# looks like: ``--db-password X``, ``DB_PASS=X``, ``--dbPassword X``, ``?sig=X``. Word-based on
# purpose: --tokenizer-path, --max-tokens, --keep-alive, --kv-cache-dtype, --monkey, --passes,
# bypass= and compass= are not secret.
STRONG_WORDS = frozenset(
    {
        "secret",
        "secrets",
        "password",
        "passwd",
        "pass",
        "passphrase",
        "passcode",
        "passkey",
        "pwd",
        "pw",
        "apikey",
        "credential",
        "credentials",
        "cred",
        "creds",
        "cookie",
        "privatekey",
        "bearer",
        "signature",
        "secrettoken",
        "authtoken",
        "accesstoken",
    }
)
# Words that name a secret only sometimes (``#token: 120`` is progress, ``key=rank`` a label):
# a flag with one of them is secret (its value is learned); a ``name=value`` pair in free text
# only when the value looks secret (8+ characters, not a number).
WEAK_WORDS = frozenset({"token", "key", "auth", "session", "sessionid", "sig", "private"})
_SECRET_FLAG_WORDS = STRONG_WORDS | WEAK_WORDS
_SECRET_FLAG_COMPOUNDS = ("apikey", "authtoken", "accesstoken", "hftoken", "secretkey")

# Characters a secret value may span in free text. Quotes, backslashes, angle brackets and
# whitespace end it, so a replacement never eats a JSON quote or a JSON escape's backslash.
_V = r"[^\s\"'\\<>]"
_VALUE = _V + r"+"
# In key=value pairs the value also ends at the separators of query strings and lists.
_PV = r"[^\s\"'\\<>&;,)\]}]"
_PAIR_VALUE = _PV + r"+"
# A quoted value, spaces and all (``--password "a b c"``), in each spelling diag writes it:
# raw, inside a JSON string (``\"``), and HTML-escaped (``&#34;``/``&quot;``, ``&#39;``).
_DQ_ENT = r"&(?:quot|#34|#x22);"
_SQ_ENT = r"&(?:#39|#x27|apos);"
_QUOTED = (
    r'"[^"\n]*"'
    r"|'[^'\n]*'"
    r'|\\"(?:[^"\\\n]|\\[^"\n])*?\\"'
    r"|" + _DQ_ENT + r"[^\n]*?" + _DQ_ENT + r"|" + _SQ_ENT + r"[^\n]*?" + _SQ_ENT
)
_EDGE = r"(\\\"|\"|'|" + _DQ_ENT + r"|" + _SQ_ENT + r")"
_QUOTE_EDGE = re.compile(_EDGE + r"(.*?)" + _EDGE, re.DOTALL)  # lazy: \\"V\\" keeps both \\"
# Same-line whitespace: a flag at the end of one log line does not own the next line's word.
_SP = r"[^\S\r\n]+"

_STRONG_KEYS = (
    r"passw(?:or)?d|passphrase|pwd|secret|credentials?|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|secret[_-]?key|cookie|client[_-]?secret|auth[_-]?token|access[_-]?token"
    r"|refresh[_-]?token|hf[_-]?token|bearer|x-amz-signature"
)
# Short keys, only as a whole word: ``"pass": V``, ``pw: V``, ``passcode=V`` - not bypass=,
# compass: (a pattern of their own: in the alternation above, the look-behind made the scan
# of a report 5x slower).
_SHORT_KEYS = r"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))(?:pass(?:code|key)?|pw)"
# Not "signature": diag's own bundle has a "signature" field (rank classes).
_WEAK_KEYS = r"token|key|auth|session(?:[_-]?id)?"

# Multi-line secrets: PEM/OpenSSH private keys, PGP private key blocks and PGP messages.
BLOCK_KINDS = r"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?|PGP MESSAGE|[A-Z0-9 ]*SECRET KEY(?: BLOCK)?"
BLOCK_BEGIN_RE = re.compile(r"-----BEGIN (?:" + BLOCK_KINDS + r")-----")
BLOCK_END_RE = re.compile(r"-----END (?:" + BLOCK_KINDS + r")-----")
# A line of a block's body: base64 (PEM 64, OpenSSH 70, PGP 64 columns), a PGP checksum
# (``=AbCd``) or armor header (``Version: ...``), or blank.
BLOCK_BODY_RE = re.compile(r"\s*(?:[A-Za-z0-9+/]+={0,2}|=[A-Za-z0-9+/]{4}|[A-Za-z-]+: .*)?\s*")
# A full base64 line of a block (64/70/76 columns, mixed case and digits) standing alone - a
# line of a key whose BEGIN and END fell outside a log's head/tail. Hex digests (lowercase)
# and paths (their dots, dashes, underscores) do not have this shape.
_BODY_LINE = (
    r"(?<![^\s\">\[,])(?=[A-Za-z0-9+/]*[a-z])(?=[A-Za-z0-9+/]*[A-Z])(?=[A-Za-z0-9+/]*[0-9])"
    r"(?:[A-Za-z0-9+/]{76}|[A-Za-z0-9+/]{70}|[A-Za-z0-9+/]{64})(?![A-Za-z0-9+/=])"
)
# The base64 lines just before an END whose BEGIN is not in the text, however they are joined:
# newlines, a JSON list's ``", "``, a JSON string's ``\n``. At least one: a lone END line
# stays, so the last pass over a file still finds the short last body line in front of it
# when the lines were scrubbed one by one. Each chunk is maximal (the lookahead) and each
# separator one character or escape, so the run has one way to match and fails in linear
# time.
_BODY_RUN = r"(?:[A-Za-z0-9+/]{8,}={0,2}(?![A-Za-z0-9+/=])(?:[\s\",]|\\[nr])*)+"


def redact_value(value: str) -> str:
    """``value`` replaced by the placeholder, keeping the quotes around it (``"<redacted>"``)."""
    quoted = _QUOTE_EDGE.fullmatch(value)
    if quoted is not None and len(value) >= 2:
        return quoted.group(1) + PLACEHOLDER + quoted.group(3)
    if value[:1] in ("'", '"'):
        return value[0] + PLACEHOLDER
    return PLACEHOLDER


def _words(name: str) -> List[str]:
    """``--dbPassword`` -> [db, password]; ``X-Amz-Signature`` -> [x, amz, signature]."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name.lstrip("-"))
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return [w for w in re.split(r"[-_.\s]+", name.lower()) if w]


def looks_secret(value: str) -> bool:
    """A value a weak name (``token=``, ``key=``) must have to be redacted: 8+ characters of
    one token, not a number, a placeholder or a plain word list."""
    bare = value.strip("\"'\\")
    return (
        len(bare) >= 8
        and re.fullmatch(r"[\d.:%-]+", bare) is None
        and bare.lower() not in _TRIVIAL_VALUES
        and PLACEHOLDER not in bare
    )


@functools.lru_cache(maxsize=4096)
def secret_strength(name: str) -> int:
    """2: ``name`` always names a secret (``DB_PASS``, ``x-amz-signature``); 1: only when its
    value looks secret (``token``, ``key``); 0: not secret, or a location/switch (``PWD``,
    ``GOOGLE_CREDENTIALS_FILE``)."""
    upper = name.upper()
    if upper in NOT_SECRET_VALUE_NAMES or upper.endswith(LOCATION_SUFFIXES):
        return 0
    words = _words(name)
    if any(w in STRONG_WORDS for w in words):
        return 2
    joined = "".join(words)
    if any(c in joined for c in _SECRET_FLAG_COMPOUNDS):
        return 2
    return 1 if any(w in WEAK_WORDS for w in words) else 0


def _nested(value: str) -> str:
    """A quoted value of a harmless flag or name can hold a secret one: scrub inside it."""
    if value[:1] not in ("'", '"', "\\", "&"):
        return value
    value = _FLAG_RE.sub(_flag_sub, value)
    return _ASSIGN_RE.sub(_assign_sub, value)


def _flag_sub(match: Match[str]) -> str:
    flag, sep, value = match.group(1), match.group(2), match.group(3)
    if is_secret_flag(flag):
        return flag + sep + redact_value(value)
    return flag + sep + _nested(value)


def _assign_sub(match: Match[str]) -> str:
    name, value = match.group(1), match.group(2)
    strength = secret_strength(name)
    bare = value.strip("\"'\\")
    if strength == 2 and bare.lower() not in _TRIVIAL_VALUES and PLACEHOLDER not in bare:
        return f"{name}={redact_value(value)}"
    if strength == 1 and looks_secret(value):
        return f"{name}={redact_value(value)}"
    return f"{name}={_nested(value)}"


# --flag VALUE / --flag=VALUE / -flag "quoted value": every flag is matched, ``_flag_sub``
# decides with ``is_secret_flag`` (the rule argv uses), so text and argv agree.
_FLAG_RE = re.compile(
    r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9_.-]*)(=|" + _SP + r")(?!-)(" + _QUOTED + r"|[\"']?" + _VALUE
    + r")"
)  # fmt: skip
# NAME=VALUE (``export DB_PASS=x``, ``-e DB_PASS=x``, ``?sig=x&``, ``pass=x``): ``_assign_sub``
# decides with ``secret_strength``.
_ASSIGN_RE = re.compile(
    r"(?<![A-Za-z0-9_.\-/])([A-Za-z_][A-Za-z0-9_.-]*)=(?!=)(" + _QUOTED + r"|[\"']?" + _PAIR_VALUE
    + r")"
)  # fmt: skip


def _alternatives(names: FrozenSet[str] | Tuple[str, ...]) -> str:
    ordered = sorted(names, key=len, reverse=True)
    return "|".join(re.escape(n).replace(r"\ ", _SP) for n in ordered)


_TOOL_OPTION_RE = re.compile(
    r"((?<![\w-])(?:[\w./-]*/)?(?:"
    + "|".join(
        f"(?:{_alternatives(tuple(t for t, o in PASSWORD_SHORT_OPTIONS.items() if o == opt))})"
        rf"(?:{_SP}[^\s|;&-][^\s|;&]*|{_SP}-(?!{opt[1]})[^\s|;&]*)*?{_SP}{re.escape(opt)}"
        for opt in sorted(set(PASSWORD_SHORT_OPTIONS.values()))
    )
    + r")(?:"
    + _SP
    + r")?)(?!-)("
    + _QUOTED
    + r"|"
    + _VALUE
    + r")"
)
_POSITIONAL_RE = re.compile(
    r"((?<![\w-])(?:" + _alternatives(POSITIONAL_SECRET_COMMANDS) + r")(?:" + _SP
    + r"--?[A-Za-z][\w-]*)*" + _SP + r")(?!-)(" + _QUOTED + r"|" + _VALUE + r")"
)  # fmt: skip
# curl -u user:pw anywhere after curl/wget on the line; --user/--proxy-user user:pw anywhere
# (``python -u train.py:main`` is not a credential, so bare -u needs the tool).
_USERPASS_RE = re.compile(
    r"((?:(?<![\w-])(?:curl|wget)\b[^\n|;&]*?(?<![\w-])(?:-u|-U)|(?<![\w-])(?:--user|--proxy-user"
    r"|--http-user))(?:=|" + _SP + r")?[\"']?[^\s:\"'\\<>]+:)(?!\d+(?![^\s\"'\\<>]))(" + _V + r"+)"
)  # fmt: skip


# What ``pass``/``pw`` also name in ordinary logs: a timing or count (``forward pass: 12.3 ms``,
# ``pass: 3/10``) or a verdict (``pass: ok``) - not credentials.
_MEASURE_RE = re.compile(r"[\d.][\d.:/%,+-]*[A-Za-z\u00b5]{0,3}")
_VERDICT_WORDS = frozenset({"ok", "passed", "failed", "pass", "fail", "skipped", "done"})
# An unquoted value that reads as code or prose, as in a traceback's source line or a comment
# (``q_pass = q[..., :d]``, ``pw = Piecewise((x, ...``, ``custom_pass: Callable``, ``# First
# pass: Create dict``): a call, an index, a plain identifier or word without digits.
_SPACED_COLON = re.compile(r"\s:")  # YAML and JSON keys touch their colon
_CODE_OR_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z_.]*|.*[(\[].*")


def _short_pair_sub(m: Match[str]) -> str:
    """``pass``/``pw``/``passcode`` pairs: a quoted value always goes (JSON, a dict), an
    unquoted one unless it is a measure, a verdict, code or a plain word."""
    value = m.group(2)
    bare = value.strip("\"'\\")
    if _MEASURE_RE.fullmatch(bare) or bare.lower() in _TRIVIAL_VALUES | _VERDICT_WORDS:
        return m.group(0)
    after = m.string[m.end() : m.end() + 1]
    if (
        len(bare) < 4
        or bare[0] in "=:"
        or after in (".", "(", "[")
        or _SPACED_COLON.search(m.group(1))
    ):
        return m.group(0)  # ``pw == -1``, ``pw = "\\n".join(``, prose's ``pass :class:``
    if value[:1] not in ("'", '"', "\\") and _CODE_OR_WORD_RE.fullmatch(bare):
        return m.group(0)
    return m.group(1) + redact_value(value)


def _strong_pair_re(keys: str) -> Pattern[str]:
    """``KEY = VALUE`` / ``"KEY": "VALUE"`` / ``KEY: VALUE`` (also split by a ``\\r``), and
    ``\\"KEY\\": \\"VALUE\\"`` - JSON inside a JSON string, as the last pass over a file sees it."""
    return re.compile(
        r"((?:"
        + keys
        + r")(?:\\?[\"'])?\s*[=:]\s*)(?!-)("
        + _QUOTED
        + r"|[\"']?"
        + _PAIR_VALUE
        + r")",
        re.IGNORECASE,
    )


TEXT_PATTERNS: Tuple[Tuple[Pattern[str], Replacement], ...] = (
    # Private keys and PGP blocks, whole: BEGIN to END, or to the end of the text when the
    # END was cut off (a truncated log tail).
    (
        re.compile(
            BLOCK_BEGIN_RE.pattern + r".*?(?:-----END [A-Z0-9 ]+-----|\Z)",
            re.DOTALL,
        ),
        PLACEHOLDER,
    ),
    # The lines just before an END whose BEGIN was cut off, then lone full-width body lines.
    (
        re.compile(r"(?<![A-Za-z0-9+/=])" + _BODY_RUN + BLOCK_END_RE.pattern),
        PLACEHOLDER,
    ),
    (re.compile(_BODY_LINE), PLACEHOLDER),
    # scheme://user:pa/ss#w@host: a password may hold / # ? (and @: up to the last @ of the
    # URL). Not host:8080/path@x - a port is not a password.
    (
        re.compile(
            r"\b([A-Za-z][A-Za-z0-9+.-]*:(?://|\\/\\/))[^\s/?#@:\"'\\<>]*:"
            r"(?!\d{1,5}(?:[/?#\s\"'<>\\]|$))"
            r"[^\s\"'\\<>]*@"
        ),
        r"\1" + PLACEHOLDER + "@",
    ),
    # scheme://user:pass@host and scheme://token@host: the whole userinfo goes.
    (
        re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*:(?://|\\/\\/))(?:[^\s/?#@\"'\\<>]|<redacted>)+@"),
        r"\1" + PLACEHOLDER + "@",
    ),
    # Authorization / Proxy-Authorization headers: everything after the scheme word.
    (
        re.compile(
            r"((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+|(?!(?:bearer|basic|token|digest)\s)))"
            + _VALUE,
            re.IGNORECASE,
        ),
        r"\1" + PLACEHOLDER,
    ),
    (re.compile(r"(\bbearer\s+)" + _V + r"{6,}", re.IGNORECASE), r"\1" + PLACEHOLDER),
    # Cookie: a=1; b=2 - every cookie, whatever its name (before the name=value rules).
    *((pattern, replacement) for pattern, replacement, _ in COOKIE_PATTERNS),
    # --api-key X, --dbPassword "a b", --pw=X, --creds X (command lines that reach logs).
    (_FLAG_RE, _flag_sub),
    # mysql -pPW, redis-cli -a PW, wandb login KEY, curl -u user:PW.
    (_TOOL_OPTION_RE, lambda m: m.group(1) + redact_value(m.group(2))),
    (_POSITIONAL_RE, lambda m: m.group(1) + redact_value(m.group(2))),
    (_USERPASS_RE, r"\1" + PLACEHOLDER),
    # export DB_PASS=X, -e DB_PASS=X, ?sig=X&, X-Goog-Signature=X, pass=X.
    (_ASSIGN_RE, _assign_sub),
    # password=X, "client_secret": "a b", api_key: X - always. The two pair patterns start at
    # the key word: a leading ``(?<![A-Za-z0-9])[A-Za-z0-9_.-]*`` (the rest of the name) can
    # always be satisfied, so it changed no replacement, only made the scan backtrack over
    # every identifier - 80 % of the time of scrubbing a report (bench/cli_cost.py).
    (_strong_pair_re(_STRONG_KEYS), lambda m: m.group(1) + redact_value(m.group(2))),
    (_strong_pair_re(_SHORT_KEYS), _short_pair_sub),
    # token=X, key: X, session=X - only when X looks like a secret (8+ chars, not a number).
    (
        re.compile(
            r"((?:"
            + _WEAK_KEYS
            + r")(?:\\?[\"'])?\s*[=:]\s*(?:\\?[\"'])?)(?![\d.:%-]+(?!"
            + _PV
            + r"))(?="
            + _PV
            + r"{8,})"
            + _PAIR_VALUE,
            re.IGNORECASE,
        ),
        r"\1" + PLACEHOLDER,
    ),
    # Token shapes, credentials in URLs without a scheme or URL-encoded, webhook URLs.
    *((pattern, replacement) for pattern, replacement, _ in SHAPE_PATTERNS),
)


# A necessary condition of each pattern above (same order), as a case-sensitive search of the
# case-folded text: IGNORECASE scans of a whole report are slow in ``re`` (a 240 kB report took
# 0.6 s to scrub), while these find the rare texts that need the full pattern in a few ms.
# ``_fold`` maps every character that IGNORECASE equates with an ASCII letter to that letter,
# so a text a pattern matches always passes its needle; placeholders never create a needle.
_SEP = r"(?:\\?[\"'])?\s*[=:]"
# Every word of STRONG_WORDS/WEAK_WORDS contains one of these.
_WORD_NEEDLE = r"(?:pass|pw|secret|cred|cookie|private|bearer|sig|token|key|auth|session)"
NEEDLES: Tuple[Needle, ...] = (
    re.compile(r"-----begin "),
    re.compile(r"-----end "),
    re.compile(r"[a-z0-9+/]{64}"),
    re.compile(r":(?://|\\/\\/)[^\s/?#@:]*:"),
    re.compile(r":(?://|\\/\\/)"),
    re.compile(r"authorization" + _SEP),
    re.compile(r"bearer\s"),
    *(needle for _, _, needle in COOKIE_PATTERNS),
    re.compile(r"-[a-z0-9_.-]*?" + _WORD_NEEDLE),
    re.compile(r"(?:" + _alternatives(tuple(PASSWORD_SHORT_OPTIONS)) + r")[^\n]*?\s-[pa]"),
    re.compile(r"wandb" + _SP + "login"),
    re.compile(r"(?:curl|wget|--user|--proxy-user|--http-user)"),
    re.compile(_WORD_NEEDLE + r"[a-z0-9_.-]*="),
    re.compile(r"(?:" + _STRONG_KEYS + r")" + _SEP),
    re.compile(r"p(?:ass(?:code|key)?|w)" + _SEP),
    re.compile(r"(?:" + _WEAK_KEYS + r")" + _SEP),
    *(needle for _, _, needle in SHAPE_PATTERNS),
)
assert len(NEEDLES) == len(TEXT_PATTERNS)


def fold(text: str) -> str:
    """Case-fold for the needles: U+0130 and U+0131 fold to "i" as IGNORECASE matches them."""
    return text.replace("\u0130", "i").casefold().replace("\u0131", "i")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True when an environment variable's name says its value is a credential (remembered:
    every rank of a job carries the same ~100 names). The substring rule, plus short words
    matched whole: ``DB_PW``, ``AWS_CREDS``, ``URL_SIG``, ``SENTRY_DSN``."""
    if SECRET_NAME_RE.search(name) is not None:
        return True
    return any(w in _SECRET_NAME_WORDS for w in _words(name))


def is_secret_flag(flag: str) -> bool:
    """True for ``--api-key``, ``--hf-token``, ``--password``, ``--dbPassword``, ``--pw``,
    ``--creds``, ``--auth`` (not ``--tokenizer-path``, ``--keep-alive``, ``--kv-cache-dtype``).
    """
    if not flag.startswith("-"):
        return False
    name = flag.lstrip("-").split("=", 1)[0]
    if not name:
        return False
    words = _words(name)
    if any(w in _SECRET_FLAG_WORDS for w in words):
        return True
    joined = "".join(words)
    return any(c in joined for c in _SECRET_FLAG_COMPOUNDS)


def worth_learning(value: str) -> bool:
    """A value long and specific enough that replacing it everywhere cannot mangle output."""
    stripped = value.strip()
    if len(stripped) < MIN_SECRET_CHARS or stripped.lower() in _TRIVIAL_VALUES:
        return False
    if re.fullmatch(r"[\d.,:+-]+", stripped):
        return False  # ports, counts, versions, IP addresses: scrubbing them mangles numbers
    try:
        float(stripped)
    except ValueError:
        return True
    return False
