"""What looks secret: variable names, flags, values, and secret-shaped text.

The rules ``diag.redact.Redactor`` applies, kept apart from the machinery that applies them
(learning values, scrubbing text and files, keeping JSON valid) because they are what a
reviewer audits and what changes when a new token format appears: one table of
(pattern, replacement) pairs for free text, each with a cheap "needle" that must occur before
the costly case-insensitive pattern is run, and the predicates that decide which environment
variables and command-line flags carry credentials.
"""

from __future__ import annotations

import functools
import re
from typing import Pattern, Tuple

PLACEHOLDER = "<redacted>"
MIN_SECRET_CHARS = 5

# Environment variable names that look secret (the documented rule, case-insensitive substring).
SECRET_NAME_RE = re.compile(
    r"TOKEN|SECRET|PASS|PWD|KEY|CREDENTIAL|AUTH|COOKIE|PRIVATE|SESSION", re.IGNORECASE
)
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

# A flag whose next value is secret: split the flag name on - and _ and look for these words.
# Word-based on purpose: --tokenizer-path and --max-tokens are not secret flags.
_SECRET_FLAG_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "pass",
        "passphrase",
        "pwd",
        "key",
        "apikey",
        "credential",
        "credentials",
        "auth",
        "cookie",
        "private",
        "session",
        "bearer",
    }
)
_SECRET_FLAG_COMPOUNDS = ("apikey", "authtoken", "accesstoken", "hftoken", "secretkey")

# Characters a secret value may span in free text. Quotes, backslashes, angle brackets and
# whitespace end it, so a replacement never eats a JSON quote or a JSON escape's backslash.
_V = r"[^\s\"'\\<>]"
_VALUE = _V + r"+"
# In key=value pairs the value also ends at the separators of query strings and lists.
_PV = r"[^\s\"'\\<>&;,)\]}]"
_PAIR_VALUE = _PV + r"+"

_STRONG_KEYS = (
    r"passw(?:or)?d|passphrase|pwd|secret|credentials?|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|secret[_-]?key|cookie|client[_-]?secret|auth[_-]?token|access[_-]?token"
    r"|refresh[_-]?token|hf[_-]?token|bearer|x-amz-signature"
)
# Not "signature": diag's own bundle has a "signature" field (rank classes).
_WEAK_KEYS = r"token|key|auth|session(?:[_-]?id)?"

TEXT_PATTERNS: Tuple[Tuple[Pattern[str], str], ...] = (
    # PEM private keys, whole block.
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
        PLACEHOLDER,
    ),
    # scheme://user:pass@host and scheme://token@host: the whole userinfo goes.
    (
        re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)(?:[^\s/?#@\"'\\<>]|<redacted>)+@"),
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
    # --api-key=X, --token X, --hf-token X (command lines that reach logs as text).
    (
        re.compile(
            r"((?<![\w-])--?(?:[A-Za-z0-9]+[_-])*(?:"
            + _STRONG_KEYS
            + r"|token|key)(?![A-Za-z])[A-Za-z0-9_-]*(?:=|\s+))(?!-)"
            + _VALUE,
            re.IGNORECASE,
        ),
        r"\1" + PLACEHOLDER,
    ),
    # password=X, "client_secret": "X", api_key: X - always. The two pair patterns start at
    # the key word: a leading ``(?<![A-Za-z0-9])[A-Za-z0-9_.-]*`` (the rest of the name) can
    # always be satisfied, so it changed no replacement, only made the scan backtrack over
    # every identifier - 80 % of the time of scrubbing a report (bench/cli_cost.py).
    (
        re.compile(
            r"((?:" + _STRONG_KEYS + r")[\"']?\s*[=:]\s*[\"']?)(?!-)" + _PAIR_VALUE,
            re.IGNORECASE,
        ),
        r"\1" + PLACEHOLDER,
    ),
    # token=X, key: X, session=X - only when X looks like a secret (8+ chars, not a number).
    (
        re.compile(
            r"((?:"
            + _WEAK_KEYS
            + r")[\"']?\s*[=:]\s*[\"']?)(?![\d.:%-]+(?!"
            + _PV
            + r"))(?="
            + _PV
            + r"{8,})"
            + _PAIR_VALUE,
            re.IGNORECASE,
        ),
        r"\1" + PLACEHOLDER,
    ),
    # Well-known token shapes, wherever they appear.
    (
        re.compile(
            r"(?<![A-Za-z0-9])(?:"
            r"hf_[A-Za-z0-9]{20,}"
            r"|sk-[A-Za-z0-9_-]{20,}"
            r"|gh[pousr]_[A-Za-z0-9]{30,}"
            r"|github_pat_[A-Za-z0-9_]{20,}"
            r"|glpat-[A-Za-z0-9_-]{20,}"
            r"|xox[abposr]-[A-Za-z0-9-]{10,}"
            r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
            r"|AIza[0-9A-Za-z_-]{35}"
            r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"
            r")"
        ),
        PLACEHOLDER,
    ),
)


# A necessary condition of each pattern above (same order), as a case-sensitive search of the
# case-folded text: IGNORECASE scans of a whole report are slow in ``re`` (a 240 kB report took
# 0.6 s to scrub), while these find the rare texts that need the full pattern in a few ms.
# ``_fold`` maps every character that IGNORECASE equates with an ASCII letter to that letter,
# so a text a pattern matches always passes its needle; placeholders never create a needle.
_SEP = r"[\"']?\s*[=:]"
NEEDLES: Tuple[Pattern[str], ...] = (
    re.compile(r"-----begin "),
    re.compile(r"://"),
    re.compile(r"authorization" + _SEP),
    re.compile(r"bearer\s"),
    re.compile(r"[_-](?:" + _STRONG_KEYS + r"|token|key)"),
    re.compile(r"(?:" + _STRONG_KEYS + r")" + _SEP),
    re.compile(r"(?:" + _WEAK_KEYS + r")" + _SEP),
    re.compile(r"hf_|sk-|gh[pousr]_|github_pat_|glpat-|xox[abposr]-|akia|asia|aiza|eyj"),
)


def fold(text: str) -> str:
    """Case-fold for the needles: U+0130 and U+0131 fold to "i" as IGNORECASE matches them."""
    return text.replace("\u0130", "i").casefold().replace("\u0131", "i")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True when an environment variable's name says its value is a credential (remembered:
    every rank of a job carries the same ~100 names)."""
    return SECRET_NAME_RE.search(name) is not None


def is_secret_flag(flag: str) -> bool:
    """True for ``--api-key``, ``--hf-token``, ``--password`` (not ``--tokenizer-path``)."""
    name = flag.lstrip("-").split("=", 1)[0].lower()
    if not name or not flag.startswith("-"):
        return False
    words = [w for w in re.split(r"[-_.]", name) if w]
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
