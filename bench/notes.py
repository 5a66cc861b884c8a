"""The prose of BENCHMARKS.md: how to read the table, and what profiling changed.

Kept apart from the figures so the generated file explains itself; the figures above it are
always from the run that wrote it.
"""

from __future__ import annotations

NOTES = """\
## How to read this

- **Baseline.** `py-spy dump --pid RANK` as a user types it (blocking mode), run on each rank
  one after the other; the slowest rank (by its median over the repeats) is the baseline,
  since a tool that dumps the ranks in parallel cannot beat it. diag's snapshot is one
  `Collector.take_sample`: py-spy (`--nonblocking` on Python >= 3.11) on every rank in
  parallel, plus /proc of every thread, sockets, logs and the GPU probe, each under its
  timeout. The *first* sample is what `diag capture --count 1` pays (process discovery and the
  GPU probe's first answer: on a host with no sign of an NVIDIA driver, a file check and no
  subprocess; on a GPU host, the start of the one long-lived NVML worker); a *steady* sample
  is what every `diag watch` sample pays.
- **The CPU floor.** N dumps cost N x (CPU of one dump) however they are scheduled. With fewer
  cores than ranks, the best any parallel dumper can reach is that sum over the core count; the
  "CPU floor" row gives it as a ratio. py-spy spends most of its ~25-30 ms per 64-thread rank
  in `process_vm_readv` (~12,000 calls per dump, measured with `strace -c`), which diag cannot
  change. On 2 cores, neither 4 nor 8 ranks x 64 threads can reach 1.5 x one dump: the target
  assumes roughly one core per rank, as a GPU node has.
- **Throughput.** One `diag watch --interval 1` runs against the counting target; windows
  alternate between the watch running and frozen (SIGSTOP), in ABBA order. This VM is shared:
  one window's throughput varies by 5-20 % with other work, so the per-pair quartiles are given
  and a median within a few percent of 1 is within this machine's resolution. The watch's own
  CPU share (py-spy included) bounds what it can take from a job that has a spare core.
- **Render.** Synthetic bundles from `bench/synth.py` (8 ranks x 60 threads, 30 s interval, a
  job that trains and then deadlocks). The targets concern the report (HTML); the JSON bundle
  size is given for information: a 24-hour series kept in full is what a `diag watch` journal
  (`PATH.jsonl`) grows to, while the watch's own `PATH.json` and report hold a window.
- **Collector RSS.** `bench/watch_memory.py` (the watch loop fed by a synthetic collector: 8
  ranks x 32 threads, a growing log, a finite pool of stacks), in a fresh interpreter.
- **Start-up.** CLI runs use bytecode caches, as an installed diag has (`pip install` compiles
  them). This machine sets `PYTHONDONTWRITEBYTECODE`, under which a checkout recompiles every
  module on every run: about 0.2 s more per command.

## What profiling changed (issue 7)

`diag capture --count 1` on 4 ranks spent 2.4 s beyond its sample; after these, ~0.3 s.

- **Scrubbing the outputs** (`diag/redact.py`, patterns now in `diag/secret_patterns.py`):
  0.37 s -> 0.04 s per 240 kB report. Two
  key=value patterns began with a name prefix that can always match, so `re` backtracked over
  every identifier: dropped (same replacements); the IGNORECASE patterns run only when a
  case-folded needle is present. Output identical to the old patterns on 200,000 fuzzed strings
  and on every test file.
- **Compiling the report template** (`diag/render/html.py`): ~0.2 s per run -> ~0. A jinja2
  bytecode cache in `$XDG_CACHE_HOME/diag/jinja2` (private to the user, keyed by the source and
  our options; skipped when it cannot be written).
- **Importing tabulate** (`diag/render/terminal.py`): ~70 ms per capture -> 0; only
  `diag summary` imports it now.
- **/proc per-thread reads** (`diag/probes/procfs.py`, `threads.py`): 7.7 -> 3.5 ms of CPU per
  64 threads. String paths and raw fds instead of pathlib and buffered files; the two
  context-switch counters found directly instead of parsing all of `status`.
- **Probe order** (`diag/sampler.py`): the subprocess probes (py-spy, NVML, ncclras) start
  before the GIL-bound /proc reads instead of after them: 3-10 % shorter samples at 4-8 ranks.
- **Measuring the baseline**: the slowest rank by its median dump, not the max of each
  repeat's dumps (which picked up every noise spike and flattered diag).

## What is still short of a target, and why

- **4 and 8 ranks on 2 cores.** The py-spy dumps alone need N x ~28 ms of CPU, more than 2
  cores give in 1.5 x one dump (the CPU floor rows); diag's own work per steady sample (reading
  /proc of every thread, parsing the dumps, joining them) is about a fifth of the sample's CPU,
  and a steady sample takes 1.5-1.8 x its floor. With a core per rank, as on a GPU node, the
  dumps run side by side.
- **Throughput.** The watch takes a few percent of one core; whether the target loses 1 % of
  its throughput is below what this shared VM can resolve (the quartiles of the pairs).
- **The first sample.** The NVML probe used to start a fresh Python per sample (0.14-0.24 s,
  longer than the dumps). It now checks for a driver without a subprocess and, on a GPU host,
  keeps one worker for the whole capture (killed and replaced on a timeout): ~0.6 ms per
  request after the first (fake NVML, 8 GPUs), so the first and steady samples are now close.
- **Journal size.** The synthetic watch changes every thread in every sample, the worst case
  (~46 KiB per sample here). A journal line stores only the thread records that changed since
  the previous line, so a stuck or idle job writes its blocked threads once (~10x smaller,
  `tests/test_bundle_io.py`).
"""
