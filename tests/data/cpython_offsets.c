#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"
#include "internal/pycore_dict.h"
#define P(name, expr) printf("  %s=%zu,\n", name, (size_t)(expr))
int main(void) {
  printf("version=0x%x\n", PY_VERSION_HEX);
  P("runtime_interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
  P("interp_threads_head", offsetof(PyInterpreterState, threads.head));
#if PY_VERSION_HEX >= 0x030C0000
  P("interp_modules", offsetof(PyInterpreterState, imports.modules));
  P("interp_gil", offsetof(PyInterpreterState, ceval.gil));
#else
  P("interp_modules", offsetof(PyInterpreterState, modules));
  P("runtime_gil", offsetof(_PyRuntimeState, ceval.gil));
#endif
  P("gil_locked", offsetof(struct _gil_runtime_state, locked));
  P("gil_last_holder", offsetof(struct _gil_runtime_state, last_holder));
  P("tstate_next", offsetof(PyThreadState, next));
  P("tstate_thread_id", offsetof(PyThreadState, thread_id));
  P("tstate_native_thread_id", offsetof(PyThreadState, native_thread_id));
  P("tstate_datastack_chunk", offsetof(PyThreadState, datastack_chunk));
  P("tstate_datastack_top", offsetof(PyThreadState, datastack_top));
  P("chunk_data", offsetof(_PyStackChunk, data));
#if PY_VERSION_HEX >= 0x030D0000
  P("tstate_current_frame", offsetof(PyThreadState, current_frame));
  P("frame_code", offsetof(_PyInterpreterFrame, f_executable));
  P("frame_instr", offsetof(_PyInterpreterFrame, instr_ptr));
#else
  P("tstate_cframe", offsetof(PyThreadState, cframe));
  P("cframe_current_frame", offsetof(_PyCFrame, current_frame));
  P("frame_code", offsetof(_PyInterpreterFrame, f_code));
  P("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
#endif
  P("frame_previous", offsetof(_PyInterpreterFrame, previous));
  P("frame_owner", offsetof(_PyInterpreterFrame, owner));
  P("frame_localsplus", offsetof(_PyInterpreterFrame, localsplus));
  P("frame_size", sizeof(_PyInterpreterFrame));
  P("code_filename", offsetof(PyCodeObject, co_filename));
  P("code_name", offsetof(PyCodeObject, co_name));
  P("code_qualname", offsetof(PyCodeObject, co_qualname));
  P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
  P("code_linetable", offsetof(PyCodeObject, co_linetable));
  P("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
  P("ascii_size", sizeof(PyASCIIObject));
  P("compact_size", sizeof(PyCompactUnicodeObject));
  P("unicode_length", offsetof(PyASCIIObject, length));
  P("unicode_state", offsetof(PyASCIIObject, state));
  P("bytes_size", offsetof(PyVarObject, ob_size));
  P("bytes_sval", offsetof(PyBytesObject, ob_sval));
  P("type_flags", offsetof(PyTypeObject, tp_flags));
  P("type_basicsize", offsetof(PyTypeObject, tp_basicsize));
  P("heaptype_cached_keys", offsetof(PyHeapTypeObject, ht_cached_keys));
  P("dict_keys", offsetof(PyDictObject, ma_keys));
  P("dict_values", offsetof(PyDictObject, ma_values));
  P("keys_log2_size", offsetof(PyDictKeysObject, dk_log2_size));
  P("keys_log2_index_bytes", offsetof(PyDictKeysObject, dk_log2_index_bytes));
  P("keys_kind", offsetof(PyDictKeysObject, dk_kind));
  P("keys_nentries", offsetof(PyDictKeysObject, dk_nentries));
  P("keys_indices", offsetof(PyDictKeysObject, dk_indices));
#if PY_VERSION_HEX >= 0x030D0000
  P("values_array", offsetof(PyDictValues, values));
#endif
  return 0;
}
