"""A hostile target (issue #25): child processes with tens of thousands of environment
variables, many of them secret-named, so the redactor would learn every value.

Starts ``CHILDREN`` (argv[1], default 5) children, each with ``VARS`` (argv[2], default
30,000) variables ``FLOOD_TOKEN_<i>`` of distinct 24-character values, plus the ones it was
given; argv[3] more allowlisted ``NCCL_PAD_<i>`` ones (default 0). ``PLANTED_TOKEN`` in its
own environment becomes each child's last variable (``ZZZ_PLANTED_TOKEN``) and a plain
argument of its command line, where only the learned value can scrub it. Prints READY once
every child runs; the children sleep until killed with the parent.
"""

import os
import subprocess
import sys
import time

CHILDREN = int(sys.argv[1]) if len(sys.argv) > 1 else 5
VARS = int(sys.argv[2]) if len(sys.argv) > 2 else 30_000
ALLOWED = int(sys.argv[3]) if len(sys.argv) > 3 else 0

if __name__ == "__main__":
    children = []
    for c in range(CHILDREN):
        env = dict(os.environ)
        planted = env.pop("PLANTED_TOKEN", "")
        env.update({f"NCCL_PAD_{i:05d}": f"pad{i}" for i in range(ALLOWED)})
        env.update(
            {f"FLOOD_TOKEN_{i}": f"v{c:02d}x{i:08d}q{(i * 7919) % 99991:06d}z" for i in range(VARS)}
        )
        if planted:  # last in the block, past every budget on what is kept
            env["ZZZ_PLANTED_TOKEN"] = planted
        code = (
            "import ctypes, signal, time; ctypes.CDLL(None).prctl(1, signal.SIGKILL);"
            " print('up', flush=True); time.sleep(86400)"
        )
        children.append(
            subprocess.Popen(
                [sys.executable, "-c", code, *([f"--note={planted}"] if planted else [])],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        )
    for child in children:
        child.stdout.readline()
    print("READY", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        for child in children:
            child.kill()
