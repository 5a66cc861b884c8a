"""Build a tiny Llama checkpoint that vLLM can serve on CPU, with no network.

Run with the vLLM venv's interpreter (it needs ``tokenizers``, ``transformers`` and ``torch``,
which the test venv does not have)::

    .venv-vllm/bin/python tests/vllm_model.py OUT_DIR

A byte-level BPE tokenizer (about 1,000 tokens) is trained on the standard library's own Python
sources, and a 2-layer ``LlamaForCausalLM`` with random weights is saved beside it as
safetensors. Its output is noise, which is all a test of process states needs. Head size is 32
(4 heads of 32 over a hidden size of 64): vLLM's CPU attention supports no head size below 32.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path
from typing import Iterator

VOCAB_SIZE = 1024
MAX_POSITIONS = 256
SPECIALS = ["<unk>", "<s>", "</s>"]


def _stdlib_text(limit_bytes: int = 4_000_000) -> Iterator[str]:
    """The standard library's Python sources, a few MB of text that every machine has."""
    seen = 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        yield text
        seen += len(text)
        if seen >= limit_bytes:
            return


def build_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_stdlib_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=MAX_POSITIONS,
    )
    fast.save_pretrained(str(out))


def build_model(out: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=32,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(str(out), safe_serialization=True)


def build(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    build_tokenizer(out)
    build_model(out)
    # vLLM reads the generation defaults from here when present; keep them plain.
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False})
    )
    return out


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
