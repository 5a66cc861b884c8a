"""GPUs through NVML, in a long-lived, killable worker process (NVML can hang on a bad driver).

``probe`` is what a sample calls, ``nvml_client`` diag's end of the worker, ``nvml_worker`` the
worker itself (started as ``python -m diag.probes.gpu.nvml_worker``), ``nvidia_host`` whether
this host shows any sign of a driver at all. May import ``diag.probes`` siblings and the base.
"""
