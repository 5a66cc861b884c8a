"""Cookie headers, whole: every cookie of a ``Cookie:`` header, the cookie of a
``Set-Cookie:``.

A cookie's name says nothing about whether its value is a credential: ``theme=dark`` beside
``_xsrf=V`` and ``sid=V``, or a framework's own session name. The ``name=value`` rules
redact a value by its name, so they left every cookie but the ones named like a secret
(``session=``, ``csrftoken=``). A header is redacted as a whole instead - every ``name=value``
pair after ``Cookie:``, a raw line, a JSON string (``"Cookie": "a=1; b=2"``, also escaped inside
another JSON string) or a Python dict - and the header's own name stays, for the reader.
Set-Cookie attributes after the pairs (``Path=/``, ``Expires=Wed, 21 Oct``) go with them: they
are not diagnostics.
"""

from __future__ import annotations

import re
from typing import Tuple

from diag.redaction.shapes import PLACEHOLDER, Literals, Needle, Replacement

# One cookie: ``name=value``, its value bare or double-quoted (raw or JSON-escaped).
_PAIR = r"[^\s\"'\\<>;,=]+=(?:\"[^\"\n]*\"|\\\"[^\"\\\n]*\\\"|[^\s\"'\\<>;,]*)"
# The header name (``Cookie``, ``Set-Cookie``, ``cookie2``; a JSON or dict key: a quote after
# it), its colon, an opening quote; then the pairs, split by ``;`` or ``,`` and spaces.
_COOKIE_HEADER_RE = re.compile(
    r"((?<![\w-])(?:set-)?cookie2?(?:\\?[\"'])?[ \t]*:[ \t]*(?:\\?[\"'])?)"
    r"(" + _PAIR + r"(?:[ \t]*[;,][ \t]*" + _PAIR + r")*)",
    re.IGNORECASE,
)
# URL-encoded (a header echoed in a query string or a form): ``Cookie%3A%20a%3D1%3B%20b%3D2``.
_ENCODED_COOKIE_RE = re.compile(r"((?<![\w-])(?:set-)?cookie2?%3A(?:%20|\+)*)[^\s&\"'<>]+", re.I)

# curl's ``-b 'a=1; b=2'`` (``--cookie`` is a secret flag already); ``-b FILE`` has no ``=``.
_CURL_COOKIE_RE = re.compile(
    r"((?<![\w-])curl\b[^\n|;&]*?(?<![\w-])-b(?:=|[ \t]+))"
    r"(\"[^\"\n]*=[^\"\n]*\"|'[^'\n]*=[^'\n]*'|[^\s\"'\\<>]*=[^\s\"'\\<>]*)"
)

COOKIE_PATTERNS: Tuple[Tuple[re.Pattern[str], Replacement, Needle], ...] = (
    (_COOKIE_HEADER_RE, r"\1" + PLACEHOLDER, Literals("cookie")),
    (_ENCODED_COOKIE_RE, r"\1" + PLACEHOLDER, Literals("cookie%3a")),
    (_CURL_COOKIE_RE, lambda m: m.group(1) + _quoted(m.group(2)), Literals("curl")),
)


def _quoted(value: str) -> str:
    """The placeholder, inside the value's quotes if it had them."""
    return value[0] + PLACEHOLDER + value[0] if value[:1] in ("'", '"') else PLACEHOLDER
