"""Does this host show any sign of an NVIDIA driver? Decides whether the NVML worker is started.

Starting the worker costs a Python interpreter (~0.15 s, ~40 ms of CPU) only to learn
"NVML Shared Library Not Found" on the many hosts diag runs on without a GPU. The binding
(``nvidia-ml-py``) loads the library with ``dlopen("libnvidia-ml.so.1")``, so when that name is
in none of the places the dynamic loader looks, and the driver left no other trace, the answer
is known without asking. The signs, any one of which means "ask the worker":

* ``/proc/driver/nvidia`` - the kernel module is loaded (a container may not show it);
* ``/dev/nvidiactl`` or ``/dev/nvidia0`` - device nodes, which the NVIDIA container runtime
  injects even where ``/proc/driver/nvidia`` is masked;
* ``libnvidia-ml.so.1`` in a ``LD_LIBRARY_PATH`` directory, in the loader cache
  (``/etc/ld.so.cache``, which the container runtime refreshes after mounting the driver's
  libraries) or in a default library directory (a stale cache does not hide it).

Only file existence is checked and the cache is searched as bytes: nothing is loaded into diag.
When in doubt the worker is asked; it gives the exact reason, and diag remembers the answers
that cannot change.
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

from diag.probes.procfs import ProcFS

NVML_LIBRARY = "libnvidia-ml.so.1"
LD_CACHE = "etc/ld.so.cache"
_DEVICE_NODES = ("dev/nvidiactl", "dev/nvidia0")
_WSL_LIB_DIR = "usr/lib/wsl/lib"  # WSL 2 puts the Windows driver's NVML here


def default_library_dirs(multiarch: Optional[str] = None) -> List[str]:
    """The directories the loader searches without a cache, relative to the root."""
    arch = multiarch if multiarch is not None else str(sysconfig.get_config_var("MULTIARCH") or "")
    dirs = ["lib64", "usr/lib64", "lib", "usr/lib", _WSL_LIB_DIR]
    if arch:
        dirs[:0] = [f"lib/{arch}", f"usr/lib/{arch}"]
    return dirs


def nvidia_signs(
    procfs: Optional[ProcFS] = None,
    root: str = "/",
    environ: Optional[Mapping[str, str]] = None,
    library_dirs: Optional[Sequence[str]] = None,
) -> List[str]:
    """Every sign of an NVIDIA driver found (empty: none). ``root`` prefixes the system paths
    (/dev, the loader cache, the default library directories); ``LD_LIBRARY_PATH`` entries are
    taken as they are."""
    procfs = procfs if procfs is not None else ProcFS()
    env = environ if environ is not None else os.environ
    base = Path(root)
    signs: List[str] = []
    if procfs.root.joinpath("driver", "nvidia").exists():
        signs.append(str(procfs.root.joinpath("driver", "nvidia")))
    signs += [f"/{node}" for node in _DEVICE_NODES if base.joinpath(node).exists()]
    for entry in env.get("LD_LIBRARY_PATH", "").split(":"):
        if entry and Path(entry, NVML_LIBRARY).exists():
            signs.append(str(Path(entry, NVML_LIBRARY)))
    if _in_loader_cache(base.joinpath(LD_CACHE)):
        signs.append(f"{NVML_LIBRARY} in /{LD_CACHE}")
    dirs = library_dirs if library_dirs is not None else default_library_dirs()
    signs += [f"/{d}/{NVML_LIBRARY}" for d in dirs if base.joinpath(d, NVML_LIBRARY).exists()]
    return signs


def _in_loader_cache(path: Path) -> bool:
    """The cache stores each library's soname as a NUL-terminated string."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return NVML_LIBRARY.encode() + b"\0" in data


NO_DRIVER_REASON = (
    "NVML unavailable: no NVIDIA driver on this host "
    f"(no /proc/driver/nvidia, /dev/nvidiactl or {NVML_LIBRARY})"
)
