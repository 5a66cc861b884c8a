"""NCCL and torch.distributed evidence: log lines, NCCL RAS, and Flight Recorder dumps.

``lines`` recognises one NCCL/watchdog/CUDA/Xid line, ``logs`` summarises them per rank,
``ras`` asks a running NCCL job for its communicators, ``flight_recorder``/``fr_dump`` find
and decode the per-rank collective ring buffers. May import ``diag.probes`` siblings and the
base only.
"""
