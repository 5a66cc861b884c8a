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
- ``--flag VALUE`` for every flag whose name has a secret word (``--dbPassword``, ``--pw``,
  ``--creds``, quoted values with spaces too), ``NAME=VALUE`` for secret names (``export
  DB_PASS=``, ``-e DB_PASS=``, ``?sig=``, ``X-Amz-Signature=``), ``mysql -pPW``, ``curl -u
  user:PW``, ``wandb login KEY``;
- well-known token shapes (Hugging Face ``hf_``, OpenAI/Anthropic ``sk-``, Stripe ``sk_live_``,
  GitHub ``ghp_``..., AWS access key ids, Slack, Google API keys, JWTs);
- multi-line blocks - PEM/OpenSSH private keys, PGP private keys and messages - whole, in one
  text (``scrub``) and across the consecutive lines of a log (``scrub_lines``), including a
  block whose BEGIN or END fell outside the lines kept.

Everything diag prints goes through ``printable``: scrubbed with every value any Redactor of
this process has learned (the capture's redactor knows the target's secrets; the verdict line
is printed after it) and made terminal-safe.

Deliberate limits: values shorter than ``MIN_SECRET_CHARS``, booleans and pure numbers are not
learned (learning "1" or "8080" would scrub every digit of the report and break JSON numbers);
``token``/``key``/``auth`` pairs in logs are redacted only when the value looks like a secret
(SGLang prints ``#token: 120``, which is progress, not a credential). Every replacement is the
single placeholder ``<redacted>``, whose characters no value pattern accepts, so scrubbing is
idempotent.
"""

from __future__ import annotations

import functools
import html
import json
import re
import threading
import urllib.parse
from typing import (
    AbstractSet,
    Any,
    FrozenSet,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

from diag.redaction.argv import argv_secrets, joined_secrets
from diag.redaction.literals import LiteralSet, PrefixIndex
from diag.redaction.patterns import (
    BLOCK_BEGIN_RE,
    BLOCK_BODY_RE,
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
from diag.redaction.shapes import SHAPE_PATTERNS
from diag.redaction.stream import join_wrapped
from diag.redaction.structure import scrub_item_lines, scrub_structures
from diag.text.terminal import safe_line, safe_text

# The rules live in diag.redaction.patterns; these are re-exported for callers of this module.
__all__ = [
    "PLACEHOLDER",
    "Redactor",
    "is_secret_flag",
    "is_secret_name",
    "printable",
    "worth_learning",
]

# Linux keeps 15 characters of a process or thread name (TASK_COMM_LEN): a secret set as a
# name is stored cut there, so its 15-character prefix is learned as well.
COMM_CHARS = 15
# A secret value read only in part (``add_cut_secret``): its first this many characters
# mark it wherever it appears (the 15-character comm cut is learned apart).
CUT_HEAD_CHARS = 16
MIN_CUT_HEAD_CHARS = 8
# A text of several lines up to this long is read across its line breaks too (the launch
# tee's pieces - it reads 64 KiB at a time -, a log excerpt); a longer one (a whole report,
# made of lines already read so at their source) only line by line: the check costs two
# to three times the scrub.
JOIN_TEXT_CHARS = 64 << 10
_ANY_END_RE = re.compile(r"-----END [A-Z0-9 ]+-----")
# What a terminal hides or rewrites between a key and its value: colour and cursor codes
# (CSI ... letter) and carriage returns (``api_key=\rV`` shows only ``V``).
# Where diag cut a text it read (a 4 KiB name: ``probes.pyspy_dump``, ``probes.cpython``), in
# the spellings it is written: a learned secret straddling the cut survives as its first
# characters, which no longer match it whole. At least this many of them are redacted.
_CUT_MARKERS = ("\u2026[truncated]", "\\u2026[truncated]")
_MIN_CUT_PREFIX = 6
# What JSON, URL (quote, safe="") and HTML encoding all leave as it is.
_PLAIN_VALUE_RE = re.compile(r"[A-Za-z0-9_.~-]+")
_HIDDEN_RE = re.compile(r"(?:\x1b|\\u001b)\[[0-9;:?]*[ -/]*[@-~]|\r")


@functools.lru_cache(maxsize=1 << 16)
def _spellings(value: str) -> FrozenSet[str]:
    """The ways a value can appear in diag's outputs: raw, JSON, URL and HTML encoded.

    Cached: every process of a job carries the same environment, so the same values are
    learned once per process and per sample (5 processes of 30,000 variables spent 18 s here
    computing the same spellings again, issue #25). A value of only the characters no
    encoding changes is its only spelling (and its cut prefix): the encoders are skipped."""
    if _PLAIN_VALUE_RE.fullmatch(value):
        return frozenset((value, value[:COMM_CHARS]) if len(value) > COMM_CHARS else (value,))
    out = {value}
    out.add(json.dumps(value)[1:-1])
    out.add(json.dumps(value, ensure_ascii=False)[1:-1])
    out.add(urllib.parse.quote(value, safe=""))
    out.add(urllib.parse.quote_plus(value, safe=""))
    out.add(html.escape(value))
    out.add(_jinja_escape(value))
    if len(value) > COMM_CHARS:
        out.add(value[:COMM_CHARS])
    return frozenset(s for s in out if s)


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
        self._order: List[str] = []  # the spellings in the order learned, for ``mark``
        self._known: Optional[LiteralSet] = None
        self._prefixes: Optional[PrefixIndex] = None
        self._prefixes_at = 0
        self._dirty = False
        self._cut_heads: Set[str] = set()
        self._cut_re: Optional[re.Pattern[str]] = None

    # -- learning ---------------------------------------------------------------------------

    def add_secret(self, value: str) -> None:
        """Remember ``value`` (if specific enough) so it is scrubbed wherever it appears."""
        if worth_learning(value):
            self._learn_everywhere(_spellings(value.strip()) | _spellings(value))

    def _learn_everywhere(self, spellings: AbstractSet[str]) -> None:
        self._learn(spellings)
        if _printing is not None and _printing is not self:
            _printing._learn(spellings)

    def _learn(self, spellings: AbstractSet[str]) -> None:
        with self._lock:
            new = spellings - self._secrets
            if new:
                self._secrets |= new
                self._order.extend(sorted(new))
                self._dirty = True

    def add_cut_secret(self, head: str) -> None:
        """A secret read only in part: ``head`` is its start (a variable a read's bound cut).

        Its head is learned like any value, and wherever its first ``CUT_HEAD_CHARS`` appear,
        they go with every value character after them: the rest of the value, never read,
        may follow them in argv or a log, where a learned literal would match only the part
        that was read and leave the rest."""
        head = head.strip()
        self.add_secret(head)
        if not worth_learning(head[:CUT_HEAD_CHARS]):
            return
        spellings = _spellings(head[:CUT_HEAD_CHARS])
        self._learn_cut(spellings)
        if _printing is not None and _printing is not self:
            _printing._learn_cut(spellings)

    def _learn_cut(self, spellings: AbstractSet[str]) -> None:
        with self._lock:
            fresh = {s for s in spellings if len(s) >= MIN_CUT_HEAD_CHARS} - self._cut_heads
            if not fresh:
                return
            self._cut_heads |= fresh
            ordered = sorted(self._cut_heads, key=len, reverse=True)
            self._cut_re = re.compile(
                "(?:" + "|".join(re.escape(h) for h in ordered) + r")[^\s\"'\\<>]*"
            )

    def add_environ(self, env: Union[Mapping[str, str], Sequence[Tuple[str, str]]]) -> None:
        """Learn the values of every secret-looking variable of a process environment, in one
        batch (one lock and one sort for 30,000 variables, not 30,000); (name, value) pairs
        keep every value of a name defined twice."""
        batch: Set[str] = set()
        pairs = env.items() if isinstance(env, Mapping) else env
        for name, value in pairs:
            if value in self._secrets:  # learned before (the same env, sample after sample)
                continue
            if not is_secret_name(name) or name.upper() in NOT_SECRET_VALUE_NAMES:
                continue
            if name.upper().endswith(LOCATION_SUFFIXES):
                continue
            if worth_learning(value):
                batch |= _spellings(value.strip()) | _spellings(value)
        if batch:
            self._learn_everywhere(batch)

    def mark(self) -> int:
        """A point in what this redactor has learned, for ``rescrub_bytes``."""
        with self._lock:
            return len(self._order)

    def learned_since(self, since: int) -> Tuple[bytes, ...]:
        """The spellings learned after ``mark()`` returned ``since``, as bytes."""
        with self._lock:
            fresh = self._order[since:]
        return tuple(value.encode("utf-8", "surrogateescape") for value in fresh)

    def rescrub_bytes(self, data: bytes, since: int) -> bytes:
        """``data`` (written earlier, scrubbed with what was known then) scrubbed again if a
        value learned after ``since`` occurs in it; else ``data`` itself, unchanged.

        A secret printed before the process carrying it appeared reached the journal and the
        launch log before diag knew it. Only the values learned since are searched (the text
        was scrubbed of the rest and of every pattern when written), so a day's journal is
        re-read cheaply and rewritten only when one of them is really there.
        """
        if not any(value in data for value in self.learned_since(since)):
            return data
        return self.scrub_bytes(data)

    # -- scrubbing --------------------------------------------------------------------------

    def _known_pattern(self) -> Optional[LiteralSet]:
        """The matcher of every learned spelling, rebuilt only when something was learned
        since the last scrub (a whole environment is learned before the next scrub)."""
        with self._lock:
            if self._dirty or (self._known is None and self._secrets):
                self._known = LiteralSet(self._secrets)
                self._dirty = False
            return self._known

    def scrub(self, text: str) -> str:
        """Return ``text`` with every known secret and secret-shaped substring replaced."""
        if not text:
            return text
        if "[truncated]" in text:
            text = self._scrub_cut_prefixes(text)
        if "\n" in text and len(text) <= JOIN_TEXT_CHARS:
            # Lines of one text (a launched job's output, a log excerpt): a key and its
            # value, or a token's halves, on two lines. Key blocks first, whole.
            lines = _scrub_blocks(text).split("\n")
            text = "\n".join(join_wrapped(self._scrub_wrapped, self._scrub_quiet, lines, True))
        scrubbed = self._scrub_plain(text)
        if ("\x1b" in text or "\r" in text or "\\u001b" in text) and _HIDDEN_RE.search(text):
            # As a terminal shows it: a key and its value split by colour codes or a \r.
            shown = _HIDDEN_RE.sub("", text)
            if self._scrub_plain(shown) != shown:
                return self._scrub_plain(_HIDDEN_RE.sub("", scrubbed))
        return scrubbed

    def _prefix_index(self) -> PrefixIndex:
        """The index of learned values by their first characters, rebuilt when more were
        learned since it was built."""
        with self._lock:
            if self._prefixes is None or self._prefixes_at != len(self._order):
                self._prefixes = PrefixIndex(self._secrets, _MIN_CUT_PREFIX)
                self._prefixes_at = len(self._order)
            return self._prefixes

    def _scrub_cut_prefixes(self, text: str) -> str:
        """A known secret's first characters right before a cut marker go too."""
        index = self._prefix_index()
        for marker in _CUT_MARKERS:
            if marker not in text:
                continue
            parts = text.split(marker)
            for i, before in enumerate(parts[:-1]):
                cut = index.cut_at_end(before)
                if cut:
                    parts[i] = before[: len(before) - cut] + PLACEHOLDER
            text = marker.join(parts)
        return text

    def _scrub_wrapped(self, text: str) -> str:
        """Learned values and token shapes only: what a token wrapped across two lines is
        found by (``join_wrapped``); the name=value rules would read ``key=2`` at one line's
        end and the next line's first word as one value."""
        cut = self._cut_re
        if cut is not None:
            text = cut.sub(PLACEHOLDER, text)
        known = self._known_pattern()
        if known is not None:
            text = known.sub(PLACEHOLDER, text)
        folded = fold(text)
        for pattern, replacement, needle in SHAPE_PATTERNS:
            if needle.search(folded):
                text = pattern.sub(replacement, text)
        return text

    def _scrub_quiet(self, text: str) -> str:
        """``_scrub_plain`` that learns nothing: for text diag joined itself (two log lines
        read as one), whose structures are not the job's."""
        return self._scrub_plain(text, learn=False)

    def _scrub_plain(self, text: str, learn: bool = True) -> str:
        """Known values, then structures (argv lists, netrc), then the patterns."""
        cut = self._cut_re
        if cut is not None:  # before the literals: they would take the head alone
            text = cut.sub(PLACEHOLDER, text)
        known = self._known_pattern()
        if known is not None:
            text = known.sub(PLACEHOLDER, text)
        text = scrub_structures(text, self.add_secret if learn else _learn_nothing)
        folded = fold(text)
        for (pattern, replacement), needle in zip(TEXT_PATTERNS, NEEDLES):
            if needle.search(folded):
                text = pattern.sub(replacement, text)
        return text

    def scrub_lines(self, lines: Sequence[str]) -> Tuple[str, ...]:
        """Scrub consecutive lines of one text (a log's head or tail) as a whole.

        A private key spans lines, and a log's lines are scrubbed one by one otherwise: every
        line from a BEGIN to its END goes, and when the kept lines start inside a block (its
        BEGIN before the tail) or end inside one (its END after the head), the body lines
        before the END / after the BEGIN go too.
        """
        out = list(lines)
        in_block = False
        for i, line in enumerate(out):
            if in_block:
                end = _ANY_END_RE.search(line)
                out[i] = PLACEHOLDER + (line[end.end() :] if end else "")
                in_block = end is None
                continue
            begin = BLOCK_BEGIN_RE.search(line)
            if begin is not None:
                if _ANY_END_RE.search(line, begin.end()) is None:
                    out[i] = line[: begin.start()] + PLACEHOLDER
                    in_block = True
                continue  # a block within one line: scrub's pattern takes it
            end = _ANY_END_RE.search(line)
            if end is not None and "-----BEGIN " not in line:
                j = i - 1
                while j >= 0 and out[j] != PLACEHOLDER and BLOCK_BODY_RE.fullmatch(out[j]):
                    out[j] = PLACEHOLDER
                    j -= 1
                out[i] = PLACEHOLDER + line[end.end() :]
        if len(out) > 1:
            out = scrub_item_lines(out, self.add_secret)  # a YAML/JSON argv list, one a line
            out = join_wrapped(self._scrub_wrapped, self._scrub_quiet, out)  # wrapped secrets
        return tuple(self.scrub(line) for line in out)

    def scrub_argv(self, argv: Sequence[str]) -> Tuple[str, ...]:
        """Redact the secrets of ``argv`` (and learn them), then scrub each argument.

        Which arguments hold one is ``diag.redaction.argv``'s: ``--flag VALUE``/``--flag=VALUE``,
        ``NAME=VALUE`` with a secret name (``docker run -e DB_PASS=x``), the password option
        of known tools (``mysql -pPW``, ``redis-cli -a PW``) and an unknown program's ``-p``
        when its value reads like a password, ``wandb login KEY``, ``curl -u user:PW``,
        ``openssl -passin pass:PW`` and secret headers. An argument that is itself a command
        line - a process title rewritten in place (setproctitle), ``sh -c 'python x.py --token
        V'`` - is split like a shell would and judged by the same rules (``joined_secrets``).
        """
        spans = argv_secrets(argv)
        out: List[str] = []
        for index, arg in enumerate(argv):
            joined = joined_secrets(arg) if _command_like(argv, index) else []
            for value in joined:  # a title rewritten in place, an ``sh -c`` command: an argv
                self.add_secret(value)  # joined into one, its values replaced where they are
            offset = spans.get(index)
            if offset is not None and joined and any(c.isspace() for c in arg[:offset]):
                offset = None  # ``worker --api-key=V --port 1`` is no NAME=VALUE: the words are
            if offset is not None:
                self.add_secret(arg[offset:])
                arg = arg[:offset] + PLACEHOLDER
            out.append(arg)
        return tuple(self.scrub(a) for a in out)

    def scrub_obj(self, obj: Any) -> Any:
        """Scrub every string (keys too) of a decoded JSON value, keeping its structure."""
        if isinstance(obj, str):
            return self.scrub(obj)
        if isinstance(obj, list):
            if len(obj) > 1 and all(isinstance(v, str) for v in obj):
                return list(self.scrub_lines(obj))  # a log's lines: blocks span them
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


def _command_like(argv: Sequence[str], index: int) -> bool:
    """Whether ``argv[index]`` may be a command line joined into one argument (a title, the
    command of ``sh -c``): it has whitespace and is not a program's source (``python -c``,
    whose docstrings and string literals would teach words as secrets)."""
    arg = argv[index]
    if not any(c.isspace() for c in arg):
        return False
    if index >= 2 and argv[index - 1] == "-c":
        return not argv[0].rsplit("/", 1)[-1].startswith(("python", "pypy", "node", "perl"))
    return True


def _scrub_blocks(text: str) -> str:
    """``text`` with its private key blocks replaced whole (the patterns' first two): they
    span lines themselves, and reading their breaks pair by pair would cut them apart."""
    folded = fold(text)
    for (pattern, replacement), needle in list(zip(TEXT_PATTERNS, NEEDLES))[:2]:
        if needle.search(folded):
            text = pattern.sub(replacement, text)
    return text


def _learn_nothing(value: str) -> None:
    pass


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


# Learns every value any Redactor of this process learns, for ``printable``.
_printing: Optional[Redactor] = None
_printing = Redactor()


def process_redactor() -> Redactor:
    """The Redactor that learns every value any Redactor of this process learns (the one
    ``printable`` scrubs with): for a document printed whole, such as a ``--json`` answer."""
    assert _printing is not None
    return _printing


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` as diag may print it: scrubbed with every secret this process has learned
    (whichever Redactor learned it) and every pattern, then terminal-safe (``one_line``: no
    newline either, for status and verdict lines)."""
    assert _printing is not None
    scrubbed = _printing.scrub(text)
    return safe_line(scrubbed) if one_line else safe_text(scrubbed)
