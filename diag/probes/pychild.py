"""How diag starts a Python child of its own: never importing anything from the cwd.

``python -m MODULE`` puts the current directory first on ``sys.path``, ahead of the standard
library and site-packages. diag runs as root, often from a job's directory or a shared one
(``cd /scratch/alice/run && diag capture``, an MCP client's cwd, the submit directory a
``srun`` inherits on every node), and its children (the NVML worker, the MCP tools, a Slurm
node's collector) would import a ``json.py``, ``pynvml.py`` or ``diag/`` planted there, as
root. So each child gets ``-P`` (Python 3.11+: no implicit ``sys.path`` entry) and, where diag
chooses it, a working directory only root can write (``TRUSTED_CWD``) - the second is what
protects a Python older than 3.11. ``PYTHONPATH`` stays honoured: it is the environment of
whoever runs diag, not a place another user writes.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Callable, List, Optional

TRUSTED_CWD = "/"


def safe_path_flags() -> List[str]:
    """``["-P"]`` where the interpreter has it (3.11+), else nothing."""
    return ["-P"] if sys.version_info >= (3, 11) else []


def python_module_argv(module: str, python: str = sys.executable) -> List[str]:
    """``[python, -P, -m, module]``: the argv of a diag child that never imports from cwd."""
    return [python, *safe_path_flags(), "-m", module]


_PR_SET_PDEATHSIG = 1


def signal_on_parent_death(signum: int) -> Callable[[], None]:
    """A ``preexec_fn`` that has the kernel send ``signum`` to the child when the thread that
    started it dies (``PR_SET_PDEATHSIG``; only ``prctl`` runs between fork and exec). libc is
    loaded here, in the parent, not in the forked child. A no-op where libc cannot be had."""
    try:
        libc: Optional[ctypes.CDLL] = ctypes.CDLL(None, use_errno=True)
    except OSError:
        libc = None

    def preexec() -> None:
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)

    return preexec
