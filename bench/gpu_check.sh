#!/usr/bin/env bash
# GPU check for diag on a real NVIDIA host: read NVML through diag's probe, then capture a small
# CUDA job and check the NVML records.
#
#   bench/gpu_check.sh [OUT_DIR]        (from the repository root, after `make install`)
#
# 1. reads NVML once through diag's own probe (diag.probes.gpu: the worker process, under its
#    deadline) and prints, per GPU, what diag records: utilisation, power and limit, SM clock
#    against its ceiling, the clock-event (throttle) reasons, XIDs since the read began, ECC
#    (volatile/aggregate, corrected/uncorrected), retired pages or remapped rows, PCIe replays,
#    and each field NVML refused (Not Supported, Insufficient Permissions) - exit 2 ("no
#    NVML", nothing else checked) where there is no binding, library, driver or GPU;
# 2. checks an NVIDIA driver answers (nvidia-smi) - exit 2 ("skipped") when there is none;
# 3. starts a small CUDA job as rank 0 (torch matmuls on GPU 0, RANK/LOCAL_RANK set) - or,
#    without torch+CUDA, a plain `sleep` (then only the device fields are checked);
# 4. runs `diag capture --pid JOB --count 3 --interval 1`;
# 5. checks every sample has an available GpuSample whose devices carry utilisation, memory,
#    power draw and limit, SM clock and temperature, a clock-event mask, an SM ceiling, ECC
#    and PCIe replay counts (or NVML's refusal of each), that the job's PID is in a device's
#    running-process list with its GPU memory, and that diag maps that device to rank 0;
#    prints the verdict's GPU health (Verdict.gpu_health); and that a hung NVML cannot cost
#    more than the probe timeout (probe_timings_s["gpu"]).
# Exit 0: all checks passed; 1: a check failed; 2: no GPU / no NVML here (nothing checked).
# With the fake NVML (PYTHONPATH=tests/fake_nvml LD_LIBRARY_PATH=tests/fake_nvml/lib) step 1
# prints the fake's fields and step 2 skips.
set -u -o pipefail

OUT=${1:-$(mktemp -d /tmp/diag-gpu-check.XXXXXX)}
PY=${PYTHON:-.venv/bin/python}
DIAG=${DIAG:-"$PY -m diag"}
mkdir -p "$OUT"

"$PY" - <<'EOF'
import sys

from diag.model import clock_event_names
from diag.probes.gpu.probe import read_gpu
from diag.probes.runner import ProbeError

try:
    gpu = read_gpu(timeout_s=20)
except ProbeError as exc:
    print(f"gpu_check: NVML failed through diag's probe: {exc}")
    sys.exit(1)
if not gpu.available:
    print(f"gpu_check: no NVML here ({gpu.reason}): skipped")
    sys.exit(2)
print(f"gpu_check: NVML through diag's probe: driver {gpu.driver_version}, "
      f"{len(gpu.devices)} GPU(s)")
for d in gpu.devices:
    if d.error:
        print(f"  GPU {d.index}: {d.error}")
        continue
    reasons = ", ".join(clock_event_names(d.clock_event_mask)) or "none"
    mask = f"0x{d.clock_event_mask:x}" if d.clock_event_mask is not None else "?"
    print(f"  GPU {d.index} {d.name} ({d.pci_bus_id}): util {d.util_gpu_pct}% "
          f"power {d.power_w}/{d.power_limit_w} W, {d.temperature_c} C")
    print(f"    SM clock {d.sm_clock_mhz} of {d.sm_clock_max_mhz} MHz; clock-event reasons "
          f"{mask}: {reasons}")
    print(f"    XIDs {[x.xid for x in d.xids] or 'none'}; ECC volatile "
          f"{d.ecc_volatile_uncorrected} uncorrected / {d.ecc_volatile_corrected} corrected, "
          f"aggregate {d.ecc_aggregate_uncorrected} / {d.ecc_aggregate_corrected}")
    print(f"    retired pages sbe {d.retired_pages_sbe} dbe {d.retired_pages_dbe} pending "
          f"{d.retired_pages_pending}; remapped rows {d.remapped_rows_correctable} / "
          f"{d.remapped_rows_uncorrectable} pending {d.remap_pending} failed {d.remap_failed}; "
          f"PCIe replays {d.pcie_replays}")
    for field, why in sorted(d.unread.items()):
        print(f"    not read: {field}: {why}")
EOF
rc=$?
[ "$rc" -eq 0 ] || exit "$rc"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! timeout 20 nvidia-smi -L >"$OUT/nvidia-smi.txt" 2>&1; then
    echo "gpu_check: no working NVIDIA driver here (nvidia-smi missing or failing): skipped"
    exit 2
fi
echo "gpu_check: $(head -n 1 "$OUT/nvidia-smi.txt")"

JOB_CODE='
import time, torch
assert torch.cuda.is_available()
x = torch.randn(4096, 4096, device="cuda:0")
torch.cuda.synchronize()
print("READY", flush=True)
end = time.time() + 120
while time.time() < end:
    for _ in range(20):
        x = torch.tanh(x @ x / 64.0)
    torch.cuda.synchronize()
'
WITH_CUDA=0
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    WITH_CUDA=1
    RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 "$PY" -c "$JOB_CODE" >"$OUT/job.log" 2>&1 &
    JOB=$!
    for _ in $(seq 1 600); do
        grep -q READY "$OUT/job.log" 2>/dev/null && break
        kill -0 "$JOB" 2>/dev/null || { echo "gpu_check: CUDA job died:"; cat "$OUT/job.log"; exit 1; }
        sleep 0.1
    done
else
    echo "gpu_check: torch with CUDA not available: capturing a plain sleep (device fields only)"
    RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 sleep 120 &
    JOB=$!
fi
trap 'kill "$JOB" 2>/dev/null' EXIT

$DIAG capture --pid "$JOB" --count 3 --interval 1 -o "$OUT/gpu.json"
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "gpu_check: diag capture failed with exit code $rc"
    exit 1
fi

"$PY" - "$OUT/gpu.json" "$JOB" "$WITH_CUDA" <<'EOF'
import sys

from diag.bundle.io import load_bundle
from diag.verdict.gpu import map_devices_to_ranks

path, job_pid, with_cuda = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
bundle = load_bundle(path)
problems = []
FIELDS = ("util_gpu_pct", "util_mem_pct", "mem_used_bytes", "mem_total_bytes", "power_w",
          "power_limit_w", "sm_clock_mhz", "temperature_c")
# Issue #37's fields: a value, or NVML's refusal kept by name in ``unread``.
HEALTH = {"clock_event_mask": "clock_events", "sm_clock_max_mhz": "sm_clock_max",
          "ecc_volatile_uncorrected": "ecc", "pcie_replays": "pcie_replays"}
for sample in bundle.samples:
    gpu = sample.gpu
    failures = [f for f in sample.failures if f.probe == "gpu"]
    if gpu is None or not gpu.available:
        problems.append(f"sample {sample.index}: no GPU record ({gpu and gpu.reason}; {failures})")
        continue
    for dev in gpu.devices:
        missing = [f for f in FIELDS if getattr(dev, f) is None]
        missing += [f for f, why in HEALTH.items() if getattr(dev, f) is None and why not in dev.unread]
        if missing or dev.error:
            problems.append(f"sample {sample.index} GPU {dev.index}: missing {missing} {dev.error or ''}")
    print(f"sample {sample.index}: driver {gpu.driver_version}, probe {sample.probe_timings_s.get('gpu')}s")
    for dev in gpu.devices:
        procs = ", ".join(f"{p.pid}:{(p.used_memory_bytes or 0) >> 20}MiB" for p in dev.processes)
        print(f"  GPU {dev.index} {dev.name}: util {dev.util_gpu_pct}% mem {dev.util_mem_pct}% "
              f"{(dev.mem_used_bytes or 0) >> 20}/{(dev.mem_total_bytes or 0) >> 20} MiB "
              f"{dev.power_w}/{dev.power_limit_w} W SM {dev.sm_clock_mhz} MHz "
              f"{dev.temperature_c} C procs [{procs}]")
if with_cuda and bundle.samples and bundle.samples[-1].gpu and bundle.samples[-1].gpu.available:
    last = bundle.samples[-1].gpu
    holders = [d.index for d in last.devices if any(p.pid == job_pid for p in d.processes)]
    if not holders:
        problems.append(f"the CUDA job (PID {job_pid}) is in no device's process list "
                        "(a container hiding PIDs? then mapping falls back to LOCAL_RANK)")
    mapping = map_devices_to_ranks(last, bundle.processes)
    ranked = {i: (info.rank, how) for i, (info, how) in mapping.items()}
    print(f"device -> (rank, matched by): {ranked}")
    if ranked.get(0, (None,))[0] != 0:
        problems.append(f"GPU 0 not mapped to rank 0: {ranked}")
verdict = bundle.verdict
if verdict is not None:
    print(f"verdict: {verdict.state} - {verdict.summary}")
    for ev in verdict.evidence:
        if ev.signal in ("gpu", "gpu-error"):
            print(f"  evidence: {ev.detail}")
    for g in verdict.gpu_health:
        print(f"  GPU {g.index} (rank {g.rank}): SM {g.sm_clock_mhz} of {g.sm_clock_max_mhz} MHz, "
              f"reasons {list(g.reasons)}, throttled {g.throttled}, XIDs {list(g.xids)}, "
              f"ECC uncorrected {g.ecc_uncorrected}, PCIe replays {g.pcie_replays}"
              f"{', FAILED: ' + g.fatal if g.fatal else ''}")
    if not verdict.gpu_health:
        problems.append("the verdict carries no GPU health record")
if problems:
    print("gpu_check: FAILED")
    for p in problems:
        print(f"  - {p}")
    sys.exit(1)
print("gpu_check: OK - NVML records filled and mapped to ranks")
EOF
