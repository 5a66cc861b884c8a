"""slow, in a native call: a data-prep step tokenizes one huge batch with a Rust tokenizer
(HF `tokenizers`, `encode_batch`): the Python thread waits inside that one call, GIL released,
while the tokenizer's rayon pool computes on every core - the work is named by the call that
entered native code and the native threads computing for it, not "CPU-bound in `python`"."""

from __future__ import annotations

import os
import random
import sys
import threading
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")


def build_tokenizer():  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    rng = random.Random(7)
    words = [
        "".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 9)))
        for _ in range(4000)
    ]
    corpus = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(2000)]
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=3000, show_progress=False))
    return tok, words


def tokenize_shard(tok, docs):  # type: ignore[no-untyped-def]
    """The data-prep step: one call into the tokenizer for the whole shard."""
    return tok.encode_batch(docs)


def main() -> None:
    tok, words = build_tokenizer()
    rng = random.Random(11)
    docs = [" ".join(rng.choice(words) for _ in range(400)) for _ in range(30000)]
    threading.Timer(3.0, lambda: print("READY", flush=True)).start()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        tokenize_shard(tok, docs * 4)
    sys.exit(0)


if __name__ == "__main__":
    main()
