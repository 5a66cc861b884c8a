"""Multi-node Slurm jobs: fan out a collector per node over ``srun --overlap``, merge.

``controller`` runs srun and gathers the per-node bundles, ``node`` is what runs on each node
(``diag slurm-node``), ``srun``/``wire`` the transport and its line protocol, ``commands`` the
``--slurm-job`` forms of capture and watch. May import ``watch``, ``commands`` and every stage
below; never ``demo`` or ``cli``.
"""
