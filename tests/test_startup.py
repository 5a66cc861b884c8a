"""Startup phases (issue #15): what a loading job does, how far it is, when it is done, and the
framework timeout that would kill it first.

Unit tests feed the parsers recorded text and the verdict built bundles; the slow tests run real
loaders (the safetensors and torch packages, transformers' ``from_pretrained``, a real
``torch.compile``, a tqdm bar in a log) under ``diag capture`` and compare the reported progress
and ETA with the truth each program writes to a side file.
"""

from __future__ import annotations

import importlib.util
import json
import mmap
import os
import struct
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from conftest import PROGRAMS, run_diag

from diag.model import (
    Bundle,
    LogSample,
    OpenFile,
    ProcessInfo,
    ProcessSample,
    RankPhase,
    Sample,
    Verdict,
)
from diag.probes.open_files import (
    big_mappings,
    parse_fdinfo,
    parse_maps,
    parse_smaps_rss,
    read_open_files,
)
from diag.probes.procfs import ProcFS
from diag.verdict.features import extract
from diag.verdict.startup_signs import COMPILING, LOADING, last_tqdm, parse_tqdm, shard_of
from diag.verdict.startup_timeouts import timeouts_of
from diag.verdict.startup_verdict import startup_parts
from diag.vocab import VerdictState
from diag.watch.window import phase_parts, short_eta

MIB = 1 << 20


def _needs(*modules: str) -> pytest.MarkDecorator:
    """Skip where a test extra (``pip install -e .[test]``) is missing."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {', '.join(missing)}")


# --- parsers ------------------------------------------------------------------------------


def test_fdinfo_pos_and_flags() -> None:
    assert parse_fdinfo("pos:\t1048576\nflags:\t0100000\nmnt_id:\t25\n") == (1048576, 0o100000)
    assert parse_fdinfo("") == (None, None)


MAPS = """\
7f0000000000-7f0040000000 r--s 00000000 fe:00 1234   /models/model-00001-of-00004.safetensors
7f1000000000-7f1002000000 r-xp 00000000 fe:00 99     /venv/lib/libtorch_cpu.so
7f2000000000-7f2010000000 r--p 00000000 fe:00 98     /usr/lib/locale/locale-archive
7f3000000000-7f3000100000 r--p 00000000 fe:00 97     /models/tokenizer.json
7f4000000000-7f4001000000 rw-p 00000000 00:00 0
"""


def test_maps_keep_big_data_files_only() -> None:
    sizes = big_mappings(parse_maps(MAPS))
    assert sizes == {"/models/model-00001-of-00004.safetensors": 1 << 30}


def test_smaps_rss_per_path() -> None:
    text = (
        "7f0000000000-7f0040000000 r--s 00000000 fe:00 1234  /m/a.safetensors\n"
        "Size:            1048576 kB\nRss:              262144 kB\n"
        "7f1000000000-7f1002000000 r-xp 00000000 fe:00 99    /v/libx.so\n"
        "Size:              32768 kB\nRss:                 100 kB\n"
    )
    assert parse_smaps_rss(text, ["/m/a.safetensors"]) == {"/m/a.safetensors": 256 * MIB}


def test_probe_reads_own_big_fd_and_mapping(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    with open(path, "wb") as fh:
        fh.truncate(32 * MIB)  # sparse: no disk used
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * 4096)
    with open(path, "rb") as fh, open(small, "rb"):
        fh.read(3 * MIB)
        mapped = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ)
        try:
            for off in range(0, 8 * MIB, 4096):
                _ = mapped[off]  # touch: resident
            files = read_open_files(ProcFS(), os.getpid())
        finally:
            mapped.close()
    by_kind = {f.kind: f for f in files if f.path == str(path)}
    assert by_kind["read"].pos_bytes == 3 * MIB and by_kind["read"].size_bytes == 32 * MIB
    assert 8 * MIB <= (by_kind["mmap"].resident_bytes or 0) <= 32 * MIB
    assert not any(f.path == str(small) for f in files)


def test_tqdm_lines() -> None:
    bar = parse_tqdm(
        "Loading safetensors checkpoint shards:  45%|####5     | 9/20 [01:02<01:18,  6.9s/it]"
    )
    assert bar is not None and (bar.n, bar.total, bar.remaining_s) == (9, 20, 78)
    assert bar.desc == "Loading safetensors checkpoint shards"
    short = parse_tqdm("Loading safetensors checkpoint shards: 45% | 9/20 [01:02<01:18]")
    assert short is not None and short.pct == 45
    sized = parse_tqdm("model.safetensors:  12%|#2   | 1.20G/10.0G [00:30<03:40, 40.0MB/s]")
    assert sized is not None and sized.total == 10e9
    assert last_tqdm(["x: 100%|##| 20/20 [00:10<00:00]"]) is None  # finished: no phase
    assert parse_tqdm("epoch 3 loss 0.25") is None
    assert shard_of("/m/model-00004-of-00012.safetensors") == (4, 12)


def test_timeouts_from_argv_and_env() -> None:
    sg = ProcessInfo(pid=1, name="python", cmdline=("python", "-m", "sglang.launch_server"))
    assert [t.seconds for t in timeouts_of(sg)] == [300.0]
    flag = ProcessInfo(pid=1, cmdline=("python", "serve.py", "--watchdog-timeout=5"))
    assert timeouts_of(flag)[0].seconds == 5.0
    env = ProcessInfo(
        pid=1,
        env={"VLLM_RPC_TIMEOUT": "5000", "TORCH_NCCL_ENABLE_MONITORING": "1"},
    )
    got = {t.knob: t.seconds for t in timeouts_of(env)}
    assert got["`VLLM_RPC_TIMEOUT` (ms)"] == 5.0
    assert got["`TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC`"] == 480.0


# --- the verdict on built bundles ---------------------------------------------------------


def _bundle(
    files: List[Tuple[int, int]],
    path: str = "/m/model.safetensors",
    size: int = 10 << 30,
    info: Optional[ProcessInfo] = None,
    kind: str = "read",
    logs: Optional[List[Tuple[str, ...]]] = None,
) -> Bundle:
    """One process sampled every 2 s; ``files``: (pos or resident) per sample."""
    samples = []
    for i, (done, _) in enumerate(files):
        of = OpenFile(
            path=path,
            size_bytes=size,
            pos_bytes=done if kind == "read" else None,
            resident_bytes=done if kind == "mmap" else None,
            kind=kind,  # type: ignore[arg-type]
        )
        ps = ProcessSample(pid=10, t_s=100.0 + 2 * i, open_files=(of,))
        log = (
            (LogSample(path="/l/x.log", pids=(10,), tail=logs[i], mtime_s=100.0 + 2 * i),)
            if logs
            else ()
        )
        samples.append(Sample(index=i, t_s=100.0 + 2 * i, processes=(ps,), logs=log))
    return Bundle(processes=(info or ProcessInfo(pid=10, rank=0),), samples=tuple(samples))


def _judge(bundle: Bundle, state: VerdictState = "slow") -> Verdict:
    """A ``state`` verdict with what start-up adds to it, as the classifier joins them."""
    parts = startup_parts(state, bundle, extract(bundle))
    return Verdict(
        state=state,
        summary=f"{state}: x" + parts.tail,
        phases=parts.phases,
        warnings=parts.warnings,
    )


def test_read_loader_progress_and_eta() -> None:
    gib = 1 << 30
    v = _judge(_bundle([(6 * gib, 0), (int(6.5 * gib), 0), (7 * gib, 0)]))
    (phase,) = v.phases
    assert phase.phase == LOADING and phase.rank == 0
    assert phase.progress_pct == 70.0
    assert phase.eta_s == pytest.approx(12.0)  # 3 GiB left at 0.25 GiB/s
    assert "at 256.0 MiB/s" in phase.basis
    assert "rank 0 loading weights 70%, ETA ~12 s (at 256.0 MiB/s)" in v.summary


def test_shards_count_the_whole_checkpoint() -> None:
    v = _judge(
        _bundle(
            [(0, 0), (1 << 28, 0), (1 << 29, 0)],
            path="/m/model-00004-of-00012.safetensors",
            size=1 << 30,
        )
    )
    (phase,) = v.phases
    # shards 1-3 done, half of the 4th: 3.5 of 12
    assert phase.progress_pct == pytest.approx(100 * 3.5 / 12, abs=0.1)
    assert "shard 4 of 12" in phase.basis


def test_no_movement_no_eta() -> None:
    v = _judge(_bundle([(1 << 30, 0)] * 3), state="deadlocked")
    (phase,) = v.phases
    assert phase.eta_s is None and phase.progress_pct == 10.0
    assert "nothing moved" in phase.basis and "ETA" not in v.summary


def test_watchdog_shorter_than_eta_warns() -> None:
    gib = 1 << 30
    info = ProcessInfo(pid=10, rank=0, cmdline=("python", "-m", "sglang.launch_server"))
    v = _judge(_bundle([(0, 0), (gib // 8, 0), (gib // 4, 0)], info=info, size=40 * gib))
    assert v.warnings and "SGLang's watchdog (300 s)" in v.warnings[0]
    assert "raise `--watchdog-timeout`" in v.warnings[0]


def test_slurm_end_in_a_hang() -> None:
    info = ProcessInfo(pid=10, rank=0, env={"SLURM_JOB_END_TIME": "3704"})
    v = _judge(_bundle([(1 << 30, 0)] * 3, info=info), state="deadlocked")
    assert "Slurm's time limit ends it in ~60 min" in v.summary


def test_tqdm_in_the_log() -> None:
    lines = [
        ("INFO start", f"Loading checkpoint shards:  {p}%|#   | {n}/20 [00:{s:02d}<00:{r:02d}]")
        for p, n, s, r in ((20, 4, 8, 32), (30, 6, 12, 28), (40, 8, 16, 24))
    ]
    v = _judge(_bundle([(0, 0)] * 3, size=32 * MIB, logs=lines))
    (phase,) = v.phases
    assert phase.progress_pct == 40.0 and phase.eta_s == 24.0
    assert "00:24 left" in phase.basis


def test_status_line_parts() -> None:
    v = Verdict(
        state="slow",
        phases=(
            RankPhase(rank=0, pid=1, phase=LOADING, progress_pct=62.0, eta_s=190.0),
            *(RankPhase(rank=r, pid=r + 1, phase="waiting", evidence="wait in barrier")
              for r in (1, 2, 3)),
        ),
    )  # fmt: skip
    assert phase_parts(v) == [
        "rank 0 loading weights 62% ETA 3m10s",
        "ranks 1\u20133 wait in barrier",
    ]
    assert short_eta(45) == "45s" and short_eta(7300) == "2h01m"


# --- real loaders ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2 GiB safetensors file: a real header, sparse data (zeros; no disk used)."""
    path = tmp_path_factory.mktemp("weights") / "model.safetensors"
    count, each = 128, 16 * MIB
    header = {
        f"layers.{i:03d}.weight": {
            "dtype": "F32",
            "shape": [each // 4],
            "data_offsets": [i * each, (i + 1) * each],
        }
        for i in range(count)
    }
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)) + raw)
        fh.truncate(8 + len(raw) + count * each)
    return path


@pytest.fixture
def started(spawn: Any) -> Iterator[Any]:
    yield spawn


def _capture(pid: int, tmp_path: Path) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    out = tmp_path / "bundle.json"
    done = run_diag(["capture", "--pid", str(pid), "-o", str(out)], timeout_s=120)
    assert done.returncode == 0, done.stderr
    bundle = json.loads(out.read_text())
    return bundle, bundle["verdict"]


def _phase_of(verdict: Dict[str, Any], pid: int) -> Dict[str, Any]:
    found = [p for p in verdict.get("phases", []) if p.get("pid") == pid]
    assert found, verdict
    return found[0]


def _truth(side: Path, t_at: float, per_unit_s: float) -> Tuple[float, float]:
    """(progress %, seconds left) at ``t_at`` from the program's own account."""
    state = json.loads(side.read_text())
    lag = max(0.0, state["t"] - t_at)
    left = (state["total"] - state["done"]) * per_unit_s + lag
    done = state["done"] - lag / per_unit_s
    return 100.0 * done / state["total"], left


def _check(phase: Dict[str, Any], side: Path, bundle: Dict[str, Any], per_unit_s: float) -> None:
    pct, left = _truth(side, bundle["samples"][-1]["t_s"], per_unit_s)
    assert phase.get("progress_pct") is not None, phase
    assert abs(phase["progress_pct"] - pct) <= 10, (phase, pct)
    assert phase.get("eta_s") is not None, phase
    assert left / 2 <= phase["eta_s"] <= left * 2, (phase, left)


RATE_MIB = 40.0


@pytest.mark.slow
@_needs("safetensors", "torch")
def test_safetensors_mmap_under_a_short_watchdog(
    weights: Path, tmp_path: Path, started: Any
) -> None:
    side = tmp_path / "side.json"
    job = started(
        [sys.executable, str(PROGRAMS / "sglang_load.py"), "--mode", "mmap", "--file",
         str(weights), "--side", str(side), "--rate-mib", str(RATE_MIB),
         "--watchdog-timeout", "5"]
    )  # fmt: skip
    bundle, verdict = _capture(job.pid, tmp_path)
    phase = _phase_of(verdict, job.pid)
    assert phase["phase"] == LOADING and "mapped" in phase["evidence"], phase
    _check(phase, side, bundle, 1 / (RATE_MIB * MIB))
    warnings = verdict.get("warnings", [])
    assert any("`--watchdog-timeout`" in w and "SGLang" in w for w in warnings), verdict


@pytest.mark.slow
@_needs("safetensors", "torch")
def test_safetensors_read_under_a_short_rpc_timeout(
    weights: Path, tmp_path: Path, started: Any
) -> None:
    side = tmp_path / "side.json"
    job = started(
        [sys.executable, str(PROGRAMS / "startup_load.py"), "--mode", "read", "--file",
         str(weights), "--side", str(side), "--rate-mib", str(RATE_MIB)],
        env={"VLLM_RPC_TIMEOUT": "5000"},
    )  # fmt: skip
    bundle, verdict = _capture(job.pid, tmp_path)
    phase = _phase_of(verdict, job.pid)
    assert phase["phase"] == LOADING and "open" in phase["evidence"], phase
    _check(phase, side, bundle, 1 / (RATE_MIB * MIB))
    assert "ETA" in verdict["summary"], verdict["summary"]
    assert any("`VLLM_RPC_TIMEOUT`" in w for w in verdict.get("warnings", [])), verdict


@pytest.mark.slow
@_needs("torch")
def test_torch_load_of_a_big_checkpoint(tmp_path: Path, started: Any) -> None:
    import torch

    ckpt = tmp_path / "ckpt.pt"
    torch.save({f"layer{i}": torch.zeros(4 * MIB) for i in range(24)}, ckpt)  # 384 MiB
    side = tmp_path / "side.json"
    rate = 24.0
    job = started(
        [sys.executable, str(PROGRAMS / "startup_load.py"), "--mode", "torchload", "--file",
         str(ckpt), "--side", str(side), "--rate-mib", str(rate)]
    )  # fmt: skip
    bundle, verdict = _capture(job.pid, tmp_path)
    phase = _phase_of(verdict, job.pid)
    assert phase["phase"] == LOADING and "ckpt.pt" in phase["evidence"], phase
    _check(phase, side, bundle, 1 / (rate * MIB))


@pytest.mark.slow
@_needs("transformers", "torch")
def test_transformers_from_pretrained(tmp_path: Path, started: Any) -> None:
    side, log = tmp_path / "side.json", tmp_path / "load.log"
    per_item = 0.5
    job = started(
        [sys.executable, str(PROGRAMS / "startup_transformers.py"), "--dir",
         str(tmp_path / "model"), "--log", str(log), "--side", str(side),
         "--per-item", str(per_item)],
        timeout_s=120,
    )  # fmt: skip
    bundle, verdict = _capture(job.pid, tmp_path)
    phase = _phase_of(verdict, job.pid)
    assert phase["phase"] == LOADING, phase
    _check(phase, side, bundle, per_item)


@pytest.mark.slow
@_needs("tqdm")
def test_tqdm_bar_in_a_log(tmp_path: Path, started: Any) -> None:
    side, log = tmp_path / "side.json", tmp_path / "server.log"
    per_item = 1.5
    job = started(
        [sys.executable, str(PROGRAMS / "startup_tqdm.py"), "--log", str(log), "--side",
         str(side), "--per-item", str(per_item)]
    )  # fmt: skip
    bundle, verdict = _capture(job.pid, tmp_path)
    phase = _phase_of(verdict, job.pid)
    assert phase["phase"] == LOADING and "left" in phase["basis"], phase
    _check(phase, side, bundle, per_item)


@pytest.mark.slow
@_needs("torch")
def test_torch_compile_on_cpu(tmp_path: Path, started: Any) -> None:
    job = started([sys.executable, str(PROGRAMS / "startup_compile.py")], timeout_s=120)
    time.sleep(2.0)  # into the first compile
    _, verdict = _capture(job.pid, tmp_path)
    phase = _phase_of(verdict, job.pid)
    assert phase["phase"] == COMPILING, phase


@pytest.mark.slow
@_needs("safetensors", "torch")
def test_real_hang_gets_no_eta(weights: Path, tmp_path: Path, started: Any) -> None:
    side = tmp_path / "side.json"
    job = started(
        [sys.executable, str(PROGRAMS / "startup_load.py"), "--mode", "read", "--file",
         str(weights), "--side", str(side), "--rate-mib", "400", "--hang-at", "0.1"]
    )  # fmt: skip
    deadline = time.time() + 20
    while json.loads(side.read_text())["done"] < 0.1 * weights.stat().st_size:
        assert time.time() < deadline
        time.sleep(0.2)
    _, verdict = _capture(job.pid, tmp_path)
    phase = _phase_of(verdict, job.pid)
    assert phase.get("eta_s") is None, phase
    assert "ETA" not in verdict["summary"], verdict["summary"]


def test_a_growing_file_is_a_download_only_where_downloads_land() -> None:
    """A hub cache or a partial file's name is a download in progress; a checkpoint the job
    saves is its output - not "downloading"."""
    from diag.verdict.startup_signs import looks_downloaded

    assert looks_downloaded("/root/.cache/huggingface/hub/models--x/blobs/abc.incomplete")
    assert looks_downloaded("/data/model-00001-of-00004.safetensors.part")
    assert not looks_downloaded("/ckpt/step_1000/model.pt")
    assert not looks_downloaded("/tmp/unseen/ckpt.bin")
