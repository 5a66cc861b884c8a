"""Reading a few kinds of CPython objects out of another process: str, bytes, an attribute.

Kept apart from the frame walk because object layouts (compact unicode, split and managed
dicts) are their own subject. Strings and bytes are read speculatively in one ``pread`` of the
header plus a little more, which covers the identifiers and file names of code objects; a
longer object costs a second read. An attribute is looked up the way CPython stores instance
attributes of a plain class: values inline or pre-header with the type's shared keys
(3.11-3.13), or a materialized dict.
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, List, Optional, Tuple

from diag.probes.cpython.layouts import Layout
from diag.probes.cpython.pymem import RemoteMemory, RemoteReadError

_SPECULATIVE_BYTES = 96
_MAX_STRING_BYTES = 1 << 20  # a bytes object (a line table) beyond this is not read
_IMPOSSIBLE_BYTES = 1 << 40  # a length beyond this is garbage, not a big object
MAX_STRING_CHARS = 4096  # a str is read up to this many characters, then cut and marked
TRUNCATED = "…[truncated]"
# A header -> (payload offset, payload length).
_SizeOf = Callable[[bytes], Tuple[int, int]]
_KEYS_UNICODE_ENTRY = 16  # (key, value) in unicode-only and split keys
_KEYS_GENERAL_ENTRY = 24  # (hash, key, value)
_TPFLAGS_INLINE_VALUES = 1 << 2  # 3.13
_TPFLAGS_MANAGED_DICT = 1 << 4


class ObjectReader:
    """Typed reads of str, bytes and attributes, with strings cached for one dump."""

    def __init__(self, memory: RemoteMemory, layout: Layout) -> None:
        self._mem = memory
        self._lay = layout
        self._strings: Dict[int, str] = {}
        self._keys: Dict[int, List[Tuple[int, int]]] = {}
        self._types: Dict[int, Tuple[int, int, int]] = {}

    def _read_object(
        self, addr: int, header: int, size_of: _SizeOf, cap: int = _MAX_STRING_BYTES
    ) -> Tuple[bytes, int, bool]:
        """The header and the first ``size_of(header)`` payload bytes, in one read if it fits;
        at most ``cap`` of them (and whether the object held more)."""
        try:
            raw = self._mem.read(addr, header + _SPECULATIVE_BYTES)
        except RemoteReadError:
            raw = self._mem.read(addr, header)
        start, length = size_of(raw)
        if length < 0 or length > _IMPOSSIBLE_BYTES:
            raise RemoteReadError(f"object at {addr:#x} has an impossible size {length}")
        cut = length > cap
        length = min(length, cap)
        if start + length <= len(raw):
            return raw[start : start + length], start, cut
        return (self._mem.read(addr + start, length) if length else b""), start, cut

    def string(self, addr: int) -> str:
        """A str, cut to ``MAX_STRING_CHARS`` characters (then ending in ``TRUNCATED``)."""
        cached = self._strings.get(addr)
        if cached is not None:
            return cached
        lay = self._lay
        kind_width = 1
        chars = 0

        def size_of(raw: bytes) -> Tuple[int, int]:
            nonlocal kind_width, chars
            (length,) = struct.unpack_from("<q", raw, lay.unicode_length)
            chars = length
            (state,) = struct.unpack_from("<I", raw, lay.unicode_state)
            kind, compact, ascii_ = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
            if not compact or kind not in (1, 2, 4):
                raise RemoteReadError(f"string at {addr:#x} is not a compact str")
            kind_width = kind
            return (lay.ascii_size if ascii_ else lay.compact_size), length * kind

        data, _, _ = self._read_object(addr, lay.compact_size, size_of, MAX_STRING_CHARS * 4)
        data = data[: MAX_STRING_CHARS * kind_width]
        cut = chars > MAX_STRING_CHARS
        codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind_width]
        text = data.decode(codec, "replace")
        if cut:
            text += TRUNCATED
        self._strings[addr] = text
        return text

    def bytes_(self, addr: int) -> bytes:
        lay = self._lay

        def size_of(raw: bytes) -> Tuple[int, int]:
            return lay.bytes_sval, int(struct.unpack_from("<q", raw, lay.bytes_size)[0])

        data, _, cut = self._read_object(addr, lay.bytes_sval, size_of)
        if cut:
            raise RemoteReadError(f"bytes at {addr:#x} are over {_MAX_STRING_BYTES} bytes")
        return data

    def attribute(self, obj: int, name: str) -> Optional[int]:
        """The address of ``obj.name`` from its instance storage, or None if it has none."""
        lay = self._lay
        # The pre-header words (3.11: values, dict; 3.12+: dict or values) and the header
        # (refcount, type), in one read.
        first = 4 if lay.version == (3, 11) else 3
        words = struct.unpack(f"<{first + 2}Q", self._mem.read(obj - 8 * first, 8 * (first + 2)))
        flags, basicsize, shared_keys = self._type_of(words[-1])
        if not flags & _TPFLAGS_MANAGED_DICT:
            return None
        values, dict_addr = self._instance_storage(obj, flags, basicsize, words[0], words[1])
        if values:
            return self._split_value(shared_keys, values, name)
        if not dict_addr:
            return None
        keys = self._mem.ptr(dict_addr + lay.dict_keys)
        split = self._mem.ptr(dict_addr + lay.dict_values)
        if split:
            return self._split_value(keys, split + lay.values_array, name)
        for key, value in self._entries(keys):
            if key and self.string(key) == name:
                return value
        return None

    def _type_of(self, type_addr: int) -> Tuple[int, int, int]:
        """(flags, basic size, shared keys) of a heap type, read once per dump."""
        cached = self._types.get(type_addr)
        if cached is None:
            lay = self._lay
            raw = self._mem.read(type_addr, lay.heaptype_cached_keys + 8)
            cached = (
                int(struct.unpack_from("<Q", raw, lay.type_flags)[0]),
                int(struct.unpack_from("<q", raw, lay.type_basicsize)[0]),
                int(struct.unpack_from("<Q", raw, lay.heaptype_cached_keys)[0]),
            )
            self._types[type_addr] = cached
        return cached

    def _instance_storage(
        self, obj: int, flags: int, basicsize: int, word0: int, word1: int
    ) -> Tuple[int, int]:
        """(values array, dict) of a managed-dict instance, by version; 0 where absent.

        ``word0``/``word1``: the first pre-header words (3.11: values, dict; 3.12+: the
        dict-or-values word, then the GC header)."""
        version = self._lay.version
        if version == (3, 11):
            return word0, word1
        if version == (3, 12):
            return (word0 + 1, 0) if word0 & 1 else (0, word0)  # values stored as values - 1
        if flags & _TPFLAGS_INLINE_VALUES:
            inline = obj + basicsize
            if self._mem.read(inline + 3, 1)[0]:  # PyDictValues.valid
                return inline + self._lay.values_array, 0
        return 0, word0

    def _split_value(self, keys: int, values: int, name: str) -> Optional[int]:
        for index, (key, _) in enumerate(self._entries(keys)):
            if key and self.string(key) == name:
                return self._mem.ptr(values + 8 * index) or None
        return None

    def _entries(self, keys: int) -> List[Tuple[int, int]]:
        """(key, value) addresses of a keys object's entries, in insertion order."""
        cached = self._keys.get(keys)
        if cached is not None:
            return cached
        lay = self._lay
        head = self._mem.read(keys, lay.keys_indices)
        log2_index_bytes, kind = head[lay.keys_log2_index_bytes], head[lay.keys_kind]
        (count,) = struct.unpack_from("<q", head, lay.keys_nentries)
        if not 0 <= count <= 4096 or log2_index_bytes > 40:
            raise RemoteReadError(f"dict keys at {keys:#x} look corrupt")
        width = _KEYS_GENERAL_ENTRY if kind == 0 else _KEYS_UNICODE_ENTRY
        start = keys + lay.keys_indices + (1 << log2_index_bytes)
        raw = self._mem.read(start, count * width) if count else b""
        skip = 8 if width == _KEYS_GENERAL_ENTRY else 0
        entries = [struct.unpack_from("<QQ", raw, i * width + skip) for i in range(count)]
        out = [(int(k), int(v)) for k, v in entries]
        self._keys[keys] = out
        return out
