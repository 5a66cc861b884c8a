"""Collection: the sampler that runs every probe over every process of a job, each round.

``collector.Collector`` discovers the process tree, posts per-process reads to forked
workers (``shards``, ``shard_wire``) or a serial lane, runs the host-wide probes beside them
and returns one ``model.Sample`` per round; ``target`` checks a PID before anything starts;
``enrich`` reads what is read once per bundle (Flight Recorder dumps, NCCL log summary).
May import ``probes`` and the base (``model``, ``bundle``, ``errors``, ``redact``, ``text``);
never ``verdict``, ``render`` or the commands.
"""

from diag.collect.collector import Collector

__all__ = ["Collector"]
