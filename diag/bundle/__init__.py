"""The bundle on disk: one JSON document or an append-only JSON-lines journal, and merging.

Part of the base every stage shares: may import only ``diag.model``, ``diag.errors`` and the
standard library. ``io`` reads and writes bundles (schema checks, bounded reads, atomic
writes); ``journal_delta`` keeps a day-long watch's journal small; ``merge`` joins per-host
bundles into one multi-node bundle (a pure function).
"""

from diag.bundle.io import encode_bundle, load_bundle
from diag.bundle.merge import merge_bundles

__all__ = ["encode_bundle", "load_bundle", "merge_bundles"]
