"""The base of every record (``diag.model``)."""

from __future__ import annotations

import msgspec

SCHEMA_VERSION = 1


class Record(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Base of every record: immutable, keyword-only, defaults left out of the JSON."""
