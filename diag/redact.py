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

from diag.secret_patterns import (
    LOCATION_SUFFIXES,
    NEEDLES,
    NOT_SECRET_VALUE_NAMES,
    PLACEHOLDER,
    TEXT_PATTERNS,
    fold,
    is_secret_flag,
    is_secret_name,
    worth_learning,
)

# The rules live in diag.secret_patterns; these are re-exported for callers of this module.
__all__ = ["PLACEHOLDER", "Redactor", "is_secret_flag", "is_secret_name", "worth_learning"]


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
            if not is_secret_name(name) or name.upper() in NOT_SECRET_VALUE_NAMES:
                continue
            if name.upper().endswith(LOCATION_SUFFIXES):
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
        folded = fold(text)
        for (pattern, replacement), needle in zip(TEXT_PATTERNS, NEEDLES):
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
