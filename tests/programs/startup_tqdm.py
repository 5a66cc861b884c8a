"""A loader that reports with a real tqdm bar written to a log file (as a launcher's
``2> server.log`` would catch it): 20 shards at ``--per-item`` seconds each; the true count
goes to ``--side`` after each shard. READY after the first."""

from __future__ import annotations

import argparse
import json
import os
import time

from tqdm import tqdm


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--side", required=True)
    ap.add_argument("--per-item", type=float, default=1.5)
    ap.add_argument("--total", type=int, default=20)
    args = ap.parse_args()
    with open(args.log, "w") as log:
        log.write("INFO starting the model loader\n")
        log.flush()
        bar = tqdm(total=args.total, desc="Loading safetensors checkpoint shards", file=log)
        for i in range(args.total):
            time.sleep(args.per_item)
            bar.update(1)
            log.flush()
            with open(args.side + ".tmp", "w") as fh:
                json.dump({"done": i + 1, "total": args.total, "per_item": args.per_item,
                           "t": time.time()}, fh)  # fmt: skip
            os.replace(args.side + ".tmp", args.side)
            if i == 0:
                print("READY", flush=True)
        bar.close()
    time.sleep(600)


if __name__ == "__main__":
    main()
