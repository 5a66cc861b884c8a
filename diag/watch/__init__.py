"""``diag watch`` and launch mode: sample until stopped, keep the report current, journal it.

``loop`` is the sampling loop (window, classifier, journal, live report), ``window`` the
bounded state between samples and the status line, ``session`` a whole watch (attach or
launch, stop conditions, the final report), ``attach``/``launch`` how the target is found or
started, ``interrupts`` signals turned into stop requests. May import ``commands`` and every
stage below it; never ``slurm``, ``demo`` or ``cli``.
"""
