"""Probes: one source each (/proc, stacks, sockets, logs, GPUs, NCCL), each failing alone.

Pure parsers of recorded text or bytes live beside the thin I/O that reads them, and every
/proc read goes through ``procfs.ProcFS`` (an injectable root, so tests replay recorded trees).
Subpackages: ``cpython`` (diag's own stack reader for CPython 3.11-3.13), ``gpu`` (NVML in a
killable worker), ``nccl`` (NCCL/torch log lines, RAS, Flight Recorder dumps). May import only
the base (``model``, ``errors``, ``redact``, ``bundle``, ``text``) - never ``collect``,
``verdict``, ``render`` or the commands.
"""
