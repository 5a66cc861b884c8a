"""A transformers model built from a local config (random weights, nothing downloaded), saved
in shards with ``save_pretrained`` and loaded back with ``from_pretrained``. The load paces
itself per tensor (``--per-item`` seconds: slow storage) through the real loading loop's tqdm
bar, which goes to stderr - a log file here, like a launcher's ``2> load.log``. The true count
goes to ``--side``; READY after the first tensor."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--side", required=True)
    ap.add_argument("--per-item", type=float, default=0.5)
    args = ap.parse_args()
    log = open(args.log, "w")  # noqa: SIM115 - stderr for the rest of the run
    os.dup2(log.fileno(), 2)
    sys.stderr = os.fdopen(2, "w", buffering=1)

    import torch
    import transformers
    import transformers.core_model_loading as loading
    from transformers import LlamaConfig, LlamaForCausalLM

    transformers.logging.enable_progress_bar()
    if not os.path.exists(os.path.join(args.dir, "config.json")):
        config = LlamaConfig(
            hidden_size=256, intermediate_size=688, num_hidden_layers=6, num_attention_heads=4,
            num_key_value_heads=4, vocab_size=32000, tie_word_embeddings=False,
        )  # fmt: skip
        torch.manual_seed(0)
        LlamaForCausalLM(config).save_pretrained(args.dir, max_shard_size="20MB")

    base = loading.tqdm
    per_item, side = args.per_item, args.side

    def slow_tqdm(iterable, *a, **kw):  # type: ignore[no-untyped-def]
        bar = base(iterable, *a, **kw)
        total = len(iterable)

        def paced():  # type: ignore[no-untyped-def]
            for i, item in enumerate(bar):
                yield item
                time.sleep(per_item)
                with open(side + ".tmp", "w") as fh:
                    json.dump({"done": i + 1, "total": total, "per_item": per_item,
                               "t": time.time()}, fh)  # fmt: skip
                os.replace(side + ".tmp", side)
                if i == 0:
                    print("READY", flush=True)

        return paced()

    loading.tqdm = slow_tqdm
    LlamaForCausalLM.from_pretrained(args.dir)
    time.sleep(600)


if __name__ == "__main__":
    main()
