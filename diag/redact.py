"""Keep secrets out of everything diag writes: env values, argv, log lines, URLs, tokens.

Why two layers: a capture copies text from places that routinely hold credentials (argv of
``--api-key``, ``HF_TOKEN`` in the environment, a log line that prints a request header). The
probes call ``scrub``/``scrub_argv`` on what they collect, and the writers call ``scrub_bytes``
on every file as a last pass, so a secret missed by one layer (a value that reached a
template, a stack's thread name) is still caught by the other. sos-style tools leaked through
their own logs and manifests because only some outputs were filtered; the last pass is the
answer to that.

What is recognised:
- values *learned* from the environment (variables whose names look secret) and from argv
  (the value after ``--api-key``, ``--token=`` ...), replaced wherever they appear later -
  including their JSON-escaped, URL-encoded and HTML-escaped spellings;
- credentials in URLs (``scheme://user:pass@host`` -> ``scheme://<redacted>@host``);
- ``Authorization:`` headers and ``Bearer`` tokens; ``password=...``/``token: ...`` pairs;
- well-known token shapes (Hugging Face ``hf_``, OpenAI/Anthropic ``sk-``, GitHub ``ghp_``...,
  AWS access key ids, Slack, Google API keys, JWTs, PEM private-key blocks).

Deliberate limits: values shorter than ``MIN_SECRET_CHARS``, booleans and pure numbers are not
learned (learning "1" or "8080" would scrub every digit of the report and break JSON numbers);
``token``/``key``/``auth`` pairs in logs are redacted only when the value looks like a secret
(SGLang prints ``#token: 120``, which is progress, not a credential). Every replacement is the
single placeholder ``<redacted>``, whose characters no value pattern accepts, so scrubbing is
idempotent.
"""

from __future__ import annotations

import html
import json
import re
import threading
import urllib.parse
from typing import Any, Dict, List, Optional, Pattern, Sequence, Set, Tuple

PLACEHOLDER = "<redacted>"
MIN_SECRET_CHARS = 5

# Environment variable names that look secret (the documented rule, case-insensitive substring).
SECRET_NAME_RE = re.compile(
    r"TOKEN|SECRET|PASS|PWD|KEY|CREDENTIAL|AUTH|COOKIE|PRIVATE|SESSION", re.IGNORECASE
)
# Names that match the rule but whose values are locations or switches, not secrets: learning
# PWD=/work would scrub every path under /work from the report.
_NOT_SECRET_VALUE_NAMES = frozenset(
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
_LOCATION_SUFFIXES = ("_FILE", "_PATH", "_DIR", "_SOCK", "_SOCKET", "_FILENAME", "_HOME")
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

_PATTERNS: Tuple[Tuple[Pattern[str], str], ...] = (
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
_NEEDLES: Tuple[Pattern[str], ...] = (
    re.compile(r"-----begin "),
    re.compile(r"://"),
    re.compile(r"authorization" + _SEP),
    re.compile(r"bearer\s"),
    re.compile(r"[_-](?:" + _STRONG_KEYS + r"|token|key)"),
    re.compile(r"(?:" + _STRONG_KEYS + r")" + _SEP),
    re.compile(r"(?:" + _WEAK_KEYS + r")" + _SEP),
    re.compile(r"hf_|sk-|gh[pousr]_|github_pat_|glpat-|xox[abposr]-|akia|asia|aiza|eyj"),
)


def _fold(text: str) -> str:
    """Case-fold for the needles: U+0130 and U+0131 fold to "i" as IGNORECASE matches them."""
    return text.replace("\u0130", "i").casefold().replace("\u0131", "i")


def is_secret_name(name: str) -> bool:
    """True when an environment variable's name says its value is a credential."""
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


def _spellings(value: str) -> Set[str]:
    """The ways a value can appear in diag's outputs: raw, JSON, URL and HTML encoded."""
    out = {value}
    out.add(json.dumps(value)[1:-1])
    out.add(json.dumps(value, ensure_ascii=False)[1:-1])
    out.add(urllib.parse.quote(value, safe=""))
    out.add(urllib.parse.quote_plus(value, safe=""))
    out.add(html.escape(value))
    out.add(_jinja_escape(value))
    return {s for s in out if s}


def _jinja_escape(value: str) -> str:
    """markupsafe's spelling (what jinja2 templates emit): numeric quotes, unlike html.escape."""
    for raw, entity in (
        ("&", "&amp;"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ('"', "&#34;"),
        ("'", "&#39;"),
    ):
        value = value.replace(raw, entity)
    return value


class Redactor:
    """Learns secret values and removes them (and secret-shaped text) from anything.

    Thread-safe: the probes of one sample run on parallel threads and share one Redactor.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: Set[str] = set()
        self._known_re: Optional[Pattern[str]] = None
        self._dirty = False

    # -- learning ---------------------------------------------------------------------------

    def add_secret(self, value: str) -> None:
        """Remember ``value`` (if specific enough) so it is scrubbed wherever it appears."""
        if not worth_learning(value):
            return
        spellings = _spellings(value.strip()) | _spellings(value)
        with self._lock:
            if not spellings <= self._secrets:
                self._secrets |= spellings
                self._dirty = True

    def add_environ(self, env: Dict[str, str]) -> None:
        """Learn the values of every secret-looking variable of a process environment."""
        for name, value in env.items():
            if not is_secret_name(name) or name.upper() in _NOT_SECRET_VALUE_NAMES:
                continue
            if name.upper().endswith(_LOCATION_SUFFIXES):
                continue
            self.add_secret(value)

    @property
    def known_count(self) -> int:
        with self._lock:
            return len(self._secrets)

    # -- scrubbing --------------------------------------------------------------------------

    def _known_pattern(self) -> Optional[Pattern[str]]:
        with self._lock:
            if self._dirty or (self._known_re is None and self._secrets):
                ordered = sorted(self._secrets, key=len, reverse=True)
                self._known_re = re.compile("|".join(re.escape(s) for s in ordered))
                self._dirty = False
            return self._known_re

    def scrub(self, text: str) -> str:
        """Return ``text`` with every known secret and secret-shaped substring replaced."""
        if not text:
            return text
        known = self._known_pattern()
        if known is not None:
            text = known.sub(PLACEHOLDER, text)
        folded = _fold(text)
        for (pattern, replacement), needle in zip(_PATTERNS, _NEEDLES):
            if needle.search(folded):
                text = pattern.sub(replacement, text)
        return text

    def scrub_argv(self, argv: Sequence[str]) -> Tuple[str, ...]:
        """Redact the values of secret flags (and learn them), then scrub each argument."""
        out: List[str] = []
        redact_next = False
        for arg in argv:
            if redact_next and not arg.startswith("-"):
                self.add_secret(arg)
                out.append(PLACEHOLDER)
                redact_next = False
                continue
            redact_next = False
            if arg.startswith("-") and is_secret_flag(arg):
                if "=" in arg:
                    flag, value = arg.split("=", 1)
                    if value:
                        self.add_secret(value)
                        out.append(f"{flag}={PLACEHOLDER}")
                        continue
                else:
                    redact_next = True
            out.append(arg)
        return tuple(self.scrub(a) for a in out)

    def scrub_obj(self, obj: Any) -> Any:
        """Scrub every string (keys too) of a decoded JSON value, keeping its structure."""
        if isinstance(obj, str):
            return self.scrub(obj)
        if isinstance(obj, list):
            return [self.scrub_obj(v) for v in obj]
        if isinstance(obj, dict):
            return {self.scrub(str(k)): self.scrub_obj(v) for k, v in obj.items()}
        return obj

    def scrub_bytes(self, data: bytes) -> bytes:
        """Final pass over a file diag writes. JSON and JSON-lines stay valid JSON.

        Text substitution keeps the file byte-identical where nothing matched; if it would
        break a JSON document (a learned value inside a number, say), that document is
        scrubbed structurally instead: decode, scrub every string, re-encode.
        """
        text = data.decode("utf-8", "surrogateescape")
        scrubbed = self.scrub(text)
        if scrubbed == text:
            return data
        stripped = text.lstrip()
        if stripped[:1] in ("{", "["):
            scrubbed = self._keep_json_valid(text, scrubbed)
        return scrubbed.encode("utf-8", "surrogateescape")

    def _keep_json_valid(self, original: str, scrubbed: str) -> str:
        if _parses(original) and not _parses(scrubbed):
            return json.dumps(self.scrub_obj(json.loads(original)), ensure_ascii=False)
        if _parses(original):
            return scrubbed
        # JSON lines: check line by line.
        before = original.split("\n")
        after = scrubbed.split("\n")
        if len(before) != len(after):
            return scrubbed
        fixed: List[str] = []
        for old, new in zip(before, after):
            if old.strip() and _parses(old) and not _parses(new):
                new = json.dumps(self.scrub_obj(json.loads(old)), ensure_ascii=False)
            fixed.append(new)
        return "\n".join(fixed)


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
