"""``diag demo``: run a small, real job in a known state and show what diag says about it.

The stage a new user meets first: one command that needs no training job, no GPU and no
torch, and ends with the verdict line the README promises. Each demo is a stdlib-only job
module here (``job_*.py``, run as ``python -m diag.demo.job_<name>``) that reaches its state
(a rank dequantizing while the others wait in a barrier, a rank that died, a stopped rank, an
idle server, a logging training loop), signals READY, and is then captured exactly as
``diag capture --pid`` or ``diag watch --pid`` would (``diag.demo.runner``), and killed.

Imports: the runner may import ``diag.commands``, ``diag.watch`` and what they build on; the
job modules import nothing from diag but ``diag.demo._ranks`` (they run as the "user's job"
and must stay light: four ranks start on two cores within a second).
"""
