"""Where CPython keeps what a stack read needs: struct offsets per minor version (pure data).

The numbers are ``offsetof``/``sizeof`` from each version's own internal headers, printed by
``tests/data/cpython_offsets.c`` (compiled with ``-DPy_BUILD_CORE`` against
``include/pythonX.Y/internal``); ``tests/test_cpython_layouts.py`` recompiles it against every
CPython whose headers are installed on the test machine and compares. CPython keeps these
structs stable within a minor version (py-spy relies on the same: one binding per minor).
A layout that is wrong for some build is caught at read time (the code objects' type pointer,
the thread ids /proc must list) and the read falls back to py-spy; it never yields a made-up
stack.

Python < 3.11 (frame objects, no native thread id in the thread state) and >= 3.14 are left
to py-spy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class Layout:
    """Byte offsets (and two sizes) inside one CPython minor version's structs."""

    version: Tuple[int, int]
    runtime_interpreters_head: int
    interp_threads_head: int
    interp_modules: int
    # The GIL: embedded in _PyRuntime (3.11) or pointed to by the interpreter (3.12+).
    runtime_gil: Optional[int]
    interp_gil: Optional[int]
    gil_locked: int
    gil_last_holder: int
    tstate_next: int
    tstate_thread_id: int
    tstate_native_thread_id: int
    # The thread's frame stack: the current chunk and the top of its used part.
    tstate_datastack_chunk: int
    tstate_datastack_top: int
    chunk_data: int
    # 3.11/3.12: tstate->cframe->current_frame; 3.13: tstate->current_frame.
    tstate_cframe: Optional[int]
    cframe_current_frame: Optional[int]
    tstate_current_frame: Optional[int]
    frame_code: int
    frame_instr: int
    frame_previous: int
    frame_owner: int
    frame_localsplus: int
    frame_size: int
    code_filename: int
    code_name: int
    code_qualname: int
    code_firstlineno: int
    code_linetable: int
    code_adaptive: int
    ascii_size: int
    compact_size: int
    unicode_length: int
    unicode_state: int
    bytes_size: int
    bytes_sval: int
    type_flags: int
    type_basicsize: int
    heaptype_cached_keys: int
    dict_keys: int
    dict_values: int
    keys_log2_size: int
    keys_log2_index_bytes: int
    keys_kind: int
    keys_nentries: int
    keys_indices: int
    values_array: int


_COMMON = dict(
    gil_locked=16,
    gil_last_holder=8,
    tstate_next=8,
    frame_instr=56,
    chunk_data=24,
    frame_localsplus=72,
    frame_size=80,
    code_filename=112,
    code_name=120,
    code_qualname=128,
    code_linetable=136,
    unicode_length=16,
    unicode_state=32,
    bytes_size=16,
    bytes_sval=32,
    type_flags=168,
    type_basicsize=32,
    dict_keys=32,
    dict_values=40,
    keys_log2_size=8,
    keys_log2_index_bytes=9,
    keys_kind=10,
    keys_nentries=24,
    keys_indices=32,
)

LAYOUTS: Dict[Tuple[int, int], Layout] = {
    (3, 11): Layout(
        version=(3, 11),
        runtime_interpreters_head=40,
        interp_threads_head=16,
        interp_modules=888,
        runtime_gil=360,
        interp_gil=None,
        tstate_thread_id=152,
        tstate_native_thread_id=160,
        tstate_datastack_chunk=296,
        tstate_datastack_top=304,
        tstate_cframe=56,
        cframe_current_frame=8,
        tstate_current_frame=None,
        frame_code=32,
        frame_previous=48,
        frame_owner=69,
        code_firstlineno=72,
        code_adaptive=184,
        ascii_size=48,
        compact_size=72,
        heaptype_cached_keys=872,
        values_array=0,
        **_COMMON,
    ),
    (3, 12): Layout(
        version=(3, 12),
        runtime_interpreters_head=40,
        interp_threads_head=72,
        interp_modules=944,
        runtime_gil=None,
        interp_gil=384,
        tstate_thread_id=136,
        tstate_native_thread_id=144,
        tstate_datastack_chunk=232,
        tstate_datastack_top=240,
        tstate_cframe=56,
        cframe_current_frame=0,
        tstate_current_frame=None,
        frame_code=0,
        frame_previous=8,
        frame_owner=70,
        code_firstlineno=68,
        code_adaptive=192,
        ascii_size=40,
        compact_size=56,
        heaptype_cached_keys=880,
        values_array=0,
        **_COMMON,
    ),
    (3, 13): Layout(
        version=(3, 13),
        runtime_interpreters_head=632,
        interp_threads_head=7344,
        interp_modules=7656,
        runtime_gil=None,
        interp_gil=16,
        tstate_thread_id=152,
        tstate_native_thread_id=160,
        tstate_datastack_chunk=232,
        tstate_datastack_top=240,
        tstate_cframe=None,
        cframe_current_frame=None,
        tstate_current_frame=72,
        frame_code=0,
        frame_previous=8,
        frame_owner=70,
        code_firstlineno=68,
        code_adaptive=200,
        ascii_size=40,
        compact_size=56,
        heaptype_cached_keys=880,
        values_array=8,
        **_COMMON,
    ),
}

# _PyInterpreterFrame.owner: a shim frame the C stack pushed (3.12+); it has no Python code.
FRAME_OWNED_BY_CSTACK = 3


def layout_for(version: Tuple[int, int]) -> Optional[Layout]:
    """The layout of CPython ``version`` (major, minor), or None when diag does not know it."""
    return LAYOUTS.get(version)
