"""diag's own reader of CPython 3.11-3.13 stacks, from ``/proc/PID/mem``, without pausing.

``pymem`` finds the runtime (``elf_symbols``) and reads typed memory, ``layouts`` holds the
struct offsets per minor version, ``pyframes`` walks every thread's frames, ``pyobjects``
reads strings and attributes, ``linetable`` maps instructions to lines. Every read of target
memory is bounded. May import ``diag.probes`` siblings and the base only.
"""
