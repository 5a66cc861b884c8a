#!/usr/bin/env bash
# GPU check for diag on a real NVIDIA host: capture a small CUDA job, check the NVML records.
#
#   bench/gpu_check.sh [OUT_DIR]        (from the repository root, after `make install`)
#
# 1. checks an NVIDIA driver answers (nvidia-smi) - exit 2 ("skipped") when there is none;
# 2. starts a small CUDA job as rank 0 (torch matmuls on GPU 0, RANK/LOCAL_RANK set) - or,
#    without torch+CUDA, a plain `sleep` (then only the device fields are checked);
# 3. runs `diag capture --pid JOB --count 3 --interval 1`;
# 4. checks every sample has an available GpuSample whose devices carry utilisation, memory,
#    power draw and limit, SM clock and temperature, that the job's PID is in a device's
#    running-process list with its GPU memory, and that diag maps that device to rank 0;
#    and that a hung NVML cannot cost more than the probe timeout (probe_timings_s["gpu"]).
# Exit 0: all checks passed; 1: a check failed; 2: no GPU here (nothing checked).
set -u -o pipefail

OUT=${1:-$(mktemp -d /tmp/diag-gpu-check.XXXXXX)}
PY=${PYTHON:-.venv/bin/python}
DIAG=${DIAG:-"$PY -m diag"}
mkdir -p "$OUT"

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
for sample in bundle.samples:
    gpu = sample.gpu
    failures = [f for f in sample.failures if f.probe == "gpu"]
    if gpu is None or not gpu.available:
        problems.append(f"sample {sample.index}: no GPU record ({gpu and gpu.reason}; {failures})")
        continue
    for dev in gpu.devices:
        missing = [f for f in FIELDS if getattr(dev, f) is None]
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
        if ev.signal == "gpu":
            print(f"  evidence: {ev.detail}")
if problems:
    print("gpu_check: FAILED")
    for p in problems:
        print(f"  - {p}")
    sys.exit(1)
print("gpu_check: OK - NVML records filled and mapped to ranks")
EOF
