"""exited: the job finishes (exit code 0) three seconds after it is ready - the verdict must say
the target is gone, not that it hangs."""

from __future__ import annotations

import time


def main() -> None:
    print("READY", flush=True)
    time.sleep(3.0)


if __name__ == "__main__":
    main()
