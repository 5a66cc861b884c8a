"""File-lock libraries that poll for a lock (filelock, portalocker, fasteners) and torch's
file baton (cpp_extension's build lock): the sleep between tries is theirs, and the lock's
holder - or a stale lock file nobody holds - ends the wait.

Facts from filelock 3.13-3.16 (_api.py), portalocker 2.8, fasteners 0.19,
torch 2.6 torch/utils/file_baton.py.
"""

from __future__ import annotations

from diag.frameworks.base import Pack

PACK = Pack(
    name="File-lock libraries (filelock, portalocker, fasteners)",
    key="file_locks",
    modules=("filelock/", "portalocker/", "fasteners/"),
    lock_polls=(
        ("/filelock/", frozenset({"acquire", "_poll_until_acquired", "_acquire_level"})),
        ("/portalocker/", frozenset({"acquire", "_get_lock", "lock"})),
        ("/fasteners/", frozenset({"acquire", "_do_acquire", "_try_acquire"})),
    ),
    # Locks that are a file's existence, polled for: a build killed while it held one leaves
    # it behind for good (frame -> what the lock is).
    file_batons=(
        (
            "FileBaton.wait",
            "torch's build lock, a `lock` file in the extension's build directory (under "
            "`$TORCH_EXTENSIONS_DIR`, default `~/.cache/torch_extensions`)",
        ),
    ),
    sources=("filelock 3.16 src/filelock/_api.py; torch 2.6 torch/utils/file_baton.py",),
)
