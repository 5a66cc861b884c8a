"""What shows a start-up phase: the phase names, the frames, files and log lines of each phase,
tqdm progress bars, weight shards. Parsers only; ``startup`` reads the series with them.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple, Optional, Sequence, Tuple

from diag.frameworks import union
from diag.model import OpenFile
from diag.vocab import STARTUP_PHASES as STARTUP_PHASES
from diag.vocab import StartupPhase

LOADING: StartupPhase = "loading weights"


CONVERTING: StartupPhase = "converting weights"


COMPILING: StartupPhase = "compiling"


INIT_COMM: StartupPhase = "initialising communication"


DOWNLOADING: StartupPhase = "downloading"


WARMUP: StartupPhase = "warming up"


SERVING: Final = "serving"


WAITING: Final = "waiting"


# The phases of a starting job, ``diag.vocab.STARTUP_PHASES`` (serving and waiting are context
# beside them).


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".npz", ".h5")


_LOG_SUFFIXES = (".log", ".out", ".err", ".txt", ".jsonl", ".csv")


_SHARD_RE = re.compile(r"-(\d{1,6})-of-(\d{1,6})\.[A-Za-z0-9]+$")


MIN_MOVE_BYTES = 1 << 20  # less than this over the capture is no progress


# A phase's frames, files, name prefixes and log lines are its packs' (``startup_*``).
_LOADER_NAMES = union.startup_frames(LOADING)
_LOADER_FILES = union.startup_files(LOADING)
_CONVERT_PREFIXES = union.startup_prefixes(CONVERTING)
_CONVERT_NAMES = union.startup_frames(CONVERTING)
# A loading frame is never "converting" (transformers' convert_and_load_state_dict_in_model),
# nor a frame in a file that converts as part of loading.
_NOT_CONVERT = _LOADER_NAMES
_NOT_CONVERT_FILES = union.LOADING_CONVERTS
_COMPILE_FILES = union.startup_files(COMPILING)
_COMPILE_NAMES = union.startup_frames(COMPILING)
COMPILERS = union.COMPILERS
# Joining the job (the rendezvous, its store, the framework's own process groups).
_INIT_NAMES = union.startup_frames(INIT_COMM) | union.RENDEZVOUS_FRAMES


# Where a file being written is a download in progress: a model hub's cache, or a partial
# file's name. Any other growing file is the job's own output (a checkpoint, a dataset shard).
_DOWNLOAD_DIRS = union.DOWNLOAD_DIRS
_DOWNLOAD_SUFFIXES = (".incomplete", ".part", ".partial", ".download", ".crdownload", ".tmp")


def looks_downloaded(path: str) -> bool:
    """A growing file that reads as a download (``downloading`` phase), not as output: a job
    saving its checkpoint is not "downloading"."""
    low = path.lower()
    return low.endswith(_DOWNLOAD_SUFFIXES) or any(d in low for d in _DOWNLOAD_DIRS)


_DOWNLOAD_NAMES = union.startup_frames(DOWNLOADING)
_WARMUP_NAMES = union.startup_frames(WARMUP)
_COMPILE_LOG = union.startup_line(COMPILING)
_WARMUP_LOG = union.startup_line(WARMUP)


# tqdm: "desc:  45%|####5     | 9/20 [01:02<01:18,  6.9s/it]" (the bar may be " | " alone).
_TQDM_RE = re.compile(
    r"(?:(?P<desc>[^\r\n|%]*?):\s*)?(?P<pct>\d{1,3})%\s*\|(?:[^|\n]*\|)?\s*"
    r"(?P<n>\d+(?:\.\d+)?[kMGTP]?)/(?P<total>\d+(?:\.\d+)?[kMGTP]?)\s*[A-Za-z]*\s*"
    r"\[(?P<elapsed>[\d:]+)<(?P<remaining>[\d:?]+)(?P<rest>[^\]]*)\]"
)


_SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


class Tqdm(NamedTuple):
    desc: str
    pct: float
    n: float
    total: float
    elapsed_s: float
    remaining_s: Optional[float]
    text: str


def _clock(text: str) -> Optional[float]:
    try:
        parts = [int(x) for x in text.split(":")]
    except ValueError:
        return None
    out = 0
    for p in parts:
        out = out * 60 + p
    return float(out)


def _amount(text: str) -> float:
    unit = text[-1] if text and text[-1] in _SCALE else ""
    return float(text[: len(text) - len(unit)]) * _SCALE[unit]


def parse_tqdm(line: str) -> Optional[Tqdm]:
    """The last tqdm state in ``line`` (a line may hold several ``\\r``-separated updates)."""
    matches = list(_TQDM_RE.finditer(line))
    if not matches:
        return None
    found = matches[-1]
    try:
        n, total = _amount(found.group("n")), _amount(found.group("total"))
    except ValueError:
        return None
    elapsed = _clock(found.group("elapsed"))
    if total <= 0 or elapsed is None:
        return None
    desc = (found.group("desc") or "").strip()
    return Tqdm(
        desc=desc,
        pct=min(100.0, 100.0 * n / total),
        n=n,
        total=total,
        elapsed_s=elapsed,
        remaining_s=_clock(found.group("remaining")),
        text=found.group(0).strip(),
    )


def last_tqdm(lines: Sequence[str]) -> Optional[Tqdm]:
    """The newest unfinished tqdm bar among ``lines`` (a log tail, oldest first)."""
    for line in reversed(lines):
        bar = parse_tqdm(line)
        if bar is not None:
            return bar if bar.n < bar.total else None
    return None


def eta_words(seconds: float) -> str:
    """``~40 s``, ``~3 min``, ``~1.5 h``: an estimate, rounded like one."""
    if seconds < 90:
        return f"~{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"~{round(seconds / 60)} min"
    return f"~{seconds / 3600:.1f} h"


def shard_of(path: str) -> Optional[Tuple[int, int]]:
    """``model-00004-of-00012.safetensors`` -> (4, 12)."""
    m = _SHARD_RE.search(path)
    if m is None:
        return None
    i, n = int(m.group(1)), int(m.group(2))
    return (i, n) if 1 <= i <= n else None


def is_weights(path: str) -> bool:
    bare = path[: -len(" (deleted)")] if path.endswith(" (deleted)") else path
    return bare.lower().endswith(WEIGHT_SUFFIXES) or ".safetensors" in bare.lower()


def _done(f: OpenFile) -> int:
    value = f.resident_bytes if f.kind == "mmap" else f.pos_bytes
    return max(0, min(f.size_bytes, value or 0))


def file_totals(files: Sequence[OpenFile]) -> Tuple[int, int, str]:
    """(done, total, note) over the weight files of one sample; shard names extend the total
    to the whole checkpoint (the shards not open yet counted at the open ones' mean size)."""
    done = sum(_done(f) for f in files)
    total = sum(f.size_bytes for f in files)
    shards = [shard_of(f.path) for f in files]
    known = [s for s in shards if s is not None]
    if known and len(known) == len(files) and len({n for _, n in known}) == 1:
        n = known[0][1]
        indexes = {i for i, _ in known}
        mean = total / len(files)
        before = (
            min(indexes)
            - 1
            + sum(1 for i in range(min(indexes), max(indexes) + 1) if i not in indexes)
        )
        done += int(before * mean)
        total = int(mean * n)
        first = min(indexes)
        note = (
            f"shard {first} of {n}"
            if len(indexes) == 1
            else f"shards {first}-{max(indexes)} of {n}"
        )
        return done, total, note
    return done, total, ""
