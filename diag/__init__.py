"""diag: is this ML run progressing, slow, idle, or deadlocked - and why?

The packages are the pipeline, in the order data flows (see docs/ARCHITECTURE.md):
``probes`` (one source each) → ``collect`` (the sampler) → ``model``/``bundle`` (typed records,
one versioned bundle) → ``verdict`` (pure functions of a sample series) → ``render`` (reports)
→ ``commands`` / ``watch`` / ``slurm`` / ``demo`` (what the user runs), with ``cli`` a thin
click layer over them. Imports only go down that list (``tests/test_layout.py``).
"""

__version__ = "0.1.0"
