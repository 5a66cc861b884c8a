"""A parent whose child dies and whose next child gets the same PID (root only).

``pid_reuse.py LOG DONE``: starts child A (rank 0, waiting in ``old_child_waits``), prints
``READY {"parent": P, "child": A}``. On SIGUSR1 it kills and reaps A, then forks child B into
A's PID (``/proc/sys/kernel/ns_last_pid`` set to A - 1 just before the fork; another process
of the host may take it first, so it tries a few times). B has ``DB_PASSWORD`` in its
environment, writes it to LOG (a secret only its environment tells), then waits in
``newcomer_waits``. The parent writes ``{"pid": B}`` to DONE once B's line is in LOG, or
``{"pid": null}`` when the PID could not be had.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

OLD = "def old_child_waits():\n    while True:\n        time.sleep(0.05)\n\nold_child_waits()\n"
NEW = (
    "import os\n"
    "with open(os.environ['REUSE_LOG'], 'a') as fh:\n"
    "    fh.write('newcomer connects with ' + os.environ['DB_PASSWORD'] + '\\n')\n"
    "def newcomer_waits():\n    while True:\n        time.sleep(0.05)\n\nnewcomer_waits()\n"
)
SECRET = "Newcomer-Pl4nted-dbpass"


def spawn(code: str, env: dict) -> int:  # type: ignore[type-arg]
    pid = os.fork()
    if pid == 0:
        os.execve(sys.executable, [sys.executable, "-c", "import time\n" + code], env)
    return pid


def main() -> None:
    log, done = sys.argv[1], sys.argv[2]
    open(log, "a").close()
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH", "HOME")}
    old = spawn(OLD, dict(base, RANK="0", WORLD_SIZE="1"))  # a rank: marked in every sample
    exec_deadline = time.monotonic() + 10
    while time.monotonic() < exec_deadline:  # READY once A runs its own code, not ours
        with open(f"/proc/{old}/cmdline", "rb") as fh:
            if b"old_child_waits" in fh.read():
                break
        time.sleep(0.01)
    asked = []
    signal.signal(signal.SIGUSR1, lambda *_: asked.append(1))
    print("READY " + json.dumps({"parent": os.getpid(), "child": old}), flush=True)
    while not asked:
        time.sleep(0.02)
    os.kill(old, signal.SIGKILL)
    os.waitpid(old, 0)
    env = dict(base, DB_PASSWORD=SECRET, REUSE_LOG=log)
    got = None
    for _ in range(50):
        with open("/proc/sys/kernel/ns_last_pid", "w") as fh:
            fh.write(str(old - 1))
        pid = spawn(NEW, env)
        if pid == old:
            got = pid
            break
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    deadline = time.monotonic() + 10
    while got is not None and time.monotonic() < deadline:
        with open(log) as fh:
            if "newcomer connects" in fh.read():
                break
        time.sleep(0.02)
    with open(done + ".tmp", "w") as fh:
        json.dump({"pid": got}, fh)
    os.rename(done + ".tmp", done)
    while True:
        time.sleep(0.05)


if __name__ == "__main__":
    main()
