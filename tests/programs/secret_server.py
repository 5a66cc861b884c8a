"""A process holding planted secrets in every place diag reads: environment (HF_TOKEN,
DB_PASSWORD), argv (``--api-key``), a URL with credentials in argv, and its log file (a
``token=`` line and a Bearer header). Prints READY once the log is written; then waits."""

from __future__ import annotations

import sys
import threading
import time


def main() -> None:
    log_path = sys.argv[sys.argv.index("--log-file") + 1]
    with open(log_path, "a") as log:
        log.write("INFO starting server\n")
        log.write(f"DEBUG token={sys.argv[sys.argv.index('--log-token') + 1]}\n")
        log.write("DEBUG Authorization: Bearer zq8Vb3KwLmP0aXyT7rNs2dUf\n")
        log.flush()
        threading.Thread(target=time.sleep, args=(600,), name="planted-worker").start()
        print("READY", flush=True)
        time.sleep(600)


if __name__ == "__main__":
    main()
