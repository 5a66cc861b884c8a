"""The commands a user runs on one host: capture, report/summary, merge, and what they print.

``capture`` is the one place a capture is taken and its verdict attached (``watch``, ``slurm``
and ``demo`` call it); ``report`` re-renders and, for an old bundle, judges; ``merge`` joins
host bundles; ``outcome`` is what a finished command tells its user; ``output_paths`` checks
outputs before sampling. May import every stage below: ``probes``, ``collect``, ``verdict``,
``render`` and the base - never ``watch``, ``slurm``, ``demo`` or ``cli``.
"""
