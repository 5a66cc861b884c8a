"""A local Ray cluster started by the driver (this process), the way `ray.init()` does on a
laptop or a single node: gcs_server, raylet, the agents and `ray::` workers are all its
descendants. Two CPUs, a small object store, no dashboard UI."""

from __future__ import annotations

import os

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network from the tests' machine

import ray


def init() -> None:
    ray.init(
        num_cpus=2,
        object_store_memory=80 * 1024 * 1024,
        include_dashboard=False,
        logging_level="warning",
    )
