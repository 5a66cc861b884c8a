"""Secrets recognised by their own shape: token formats, credentials inside URLs, webhook URLs.

Kept apart from ``diag.redaction.patterns`` (names, flags, key/value pairs) because this is the
list that grows whenever a provider ships a new token prefix or a new place puts a credential
in a URL. Each entry is (pattern, replacement, needle): the needle is a case-sensitive search
of the case-folded text (``patterns.fold``) that every text the pattern matches passes,
so the pattern runs only on the rare texts that can hold one.

URLs: ``user:pw@host`` without a scheme (``bob:pw@db:5432``; an image digest ``py:3.11@sha256:``
and ``12:30@node`` are not), userinfo of a URL that was itself URL-encoded
(``https%3A%2F%2Fbob%3Apw%40host`` in a ``?next=``), and webhook URLs whose path is the
credential (Slack, Discord, Teams, Zapier) - the host stays, the path goes.
"""

from __future__ import annotations

import re
from typing import Callable, Match, Pattern, Protocol, Tuple, Union

PLACEHOLDER = "<redacted>"


class Needle(Protocol):
    """What gates a pattern: ``search(folded_text)`` is truthy when the pattern may match."""

    def search(self, text: str) -> object: ...


_SHORT_TEXT = 4096


class Literals:
    """A needle of plain substrings: ``in`` per literal is several times faster over a large
    report than one regex alternation of them (``re`` tries every position against the set of
    first letters, which ordinary text hits all the time)."""

    def __init__(self, *literals: str) -> None:
        self.literals = literals
        self._short = re.compile("|".join(re.escape(literal) for literal in literals))

    def search(self, text: str) -> bool:
        if len(text) < _SHORT_TEXT:  # one log line: one scan beats a call per literal
            return self._short.search(text) is not None
        return any(literal in text for literal in self.literals)


Replacement = Union[str, Callable[[Match[str]], str]]

_SLASH = r"(?:/|\\/)"  # a URL's slash, raw or JSON-escaped
_URL_CHARS = r"(?:[^\s\"'\\<>]|\\/)+"

# Anchored at the colon (a literal: ``re`` jumps between colons instead of trying a user name
# at every letter); the user name before it is checked by ``_userinfo_sub``.
_NO_SCHEME_USERINFO = re.compile(
    r"(?<=[\w.%+-]):(?!\d{1,5}(?![^\s/?#@\"'\\<>]))([^\s:@/\"'\\<>]+)@(?!sha\d+:)(?=[A-Za-z0-9\[])"
)
_ADDRESS_SCHEMES = frozenset({"mailto", "sip", "sips", "xmpp", "im", "pres"})  # scheme:user@host
_USER_BEFORE = re.compile(r"(?<![\w.%+/:@\\-])[A-Za-z][\w.%+-]*\Z")


def _userinfo_sub(m: Match[str]) -> str:
    """``bob:PW@host`` -> ``bob:<redacted>@host`` when a user name (a letter first, not part
    of a path, URL or e-mail) stands right before the colon."""
    user = _USER_BEFORE.search(m.string, max(0, m.start() - 128), m.start())
    if user is None or user.group(0).lower() in _ADDRESS_SCHEMES:
        return m.group(0)
    return ":" + PLACEHOLDER + "@"


_ENCODED_USERINFO = re.compile(
    r"(%3A%2F%2F)(?:[^\s%/?#&\"'\\<>@]|%(?!40)[0-9A-F]{2})*?%3A"
    r"(?:[^\s%/?#&\"'\\<>@]|%(?!40)[0-9A-F]{2})+%40",
    re.IGNORECASE,
)
_WEBHOOK = re.compile(
    r"((?:hooks\.slack\.com" + _SLASH + r"(?:services|workflows|triggers)"
    r"|(?:ptb\.|canary\.)?discord(?:app)?\.com" + _SLASH + r"api(?:" + _SLASH + r"v\d+)?"
    + _SLASH + r"webhooks"
    r"|\.webhook\.office\.com" + _SLASH + r"webhookb2"
    r"|hooks\.zapier\.com" + _SLASH + r"hooks" + _SLASH + r"catch)" + _SLASH + r")"
    + _URL_CHARS,
    re.IGNORECASE,
)  # fmt: skip
# openssl's ``-passin pass:PW`` / ``-passout pass:PW`` (``env:VAR`` and ``file:PATH`` are not).
_OPENSSL_PASS = re.compile(
    r"((?<![\w-])-pass(?:in|out|phrase)?(?:[ \t]+|=)[\"']?pass:)([^\s\"'\\<>]+)"
)
_TOKENS = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"hf_[A-Za-z0-9]{20,}"
    r"|sk-[A-Za-z0-9_-]{20,}"
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|whsec_[A-Za-z0-9]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abposre]-[A-Za-z0-9-]{10,}"
    r"|xapp-[A-Za-z0-9-]{10,}"
    r"|npm_[A-Za-z0-9]{30,}"
    r"|pypi-[A-Za-z0-9_-]{40,}"
    r"|ya29\.[A-Za-z0-9_-]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"
    r"|nvapi-[A-Za-z0-9_-]{40,}"  # NVIDIA API catalog / NGC
    r"|r8_[A-Za-z0-9]{30,}"  # Replicate
    r"|gsk_[A-Za-z0-9]{40,}"  # Groq
    r"|dckr_pat_[A-Za-z0-9_-]{20,}"  # Docker Hub
    r")"
)

_TOKEN_PREFIXES = (
    "hf_ sk- sk_live_ sk_test_ rk_live_ rk_test_ whsec_ ghp_ gho_ ghu_ ghs_ ghr_ github_pat_ "
    "glpat- xoxa- xoxb- xoxp- xoxo- xoxs- xoxr- xoxe- xapp- npm_ pypi- ya29. akia asia aiza eyj "
    "nvapi- r8_ gsk_ dckr_pat_"
)

_SENDGRID = re.compile(r"(?<![A-Za-z0-9])SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}")

SHAPE_PATTERNS: Tuple[Tuple[Pattern[str], Replacement, Needle], ...] = (
    (_NO_SCHEME_USERINFO, _userinfo_sub, Literals("@")),
    (_ENCODED_USERINFO, r"\1" + PLACEHOLDER + "%40", Literals("%3a%2f%2f")),
    (_WEBHOOK, r"\1" + PLACEHOLDER, Literals("hooks.", "webhook")),
    (_OPENSSL_PASS, r"\1" + PLACEHOLDER, Literals("pass:")),
    (_TOKENS, PLACEHOLDER, Literals(*_TOKEN_PREFIXES.split())),
    # SendGrid: apart, since its folded needle ``sg.`` is in every ``msg.``.
    (_SENDGRID, PLACEHOLDER, Literals("sg.")),
)
