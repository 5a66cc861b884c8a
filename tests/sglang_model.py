"""Build the tiny Llama checkpoints that SGLang serves on CPU in tests/test_sglang_real.py.

Run with the SGLang venv's interpreter (it needs ``tokenizers``, ``transformers``,
``safetensors`` and ``torch``, which the test venv does not have)::

    .venv-sglang/bin/python tests/sglang_model.py OUT_DIR            # 2 layers, ~1 MB
    .venv-sglang/bin/python tests/sglang_model.py OUT_DIR --gib 2    # ~2 GiB in 8 shards

Nothing comes from a model hub. The tokenizer is the vLLM tests' (``tests/vllm_model.py``: a
byte-level BPE of about 1,000 tokens trained on the standard library's sources). The small model
is a 2-layer ``LlamaForCausalLM`` with random weights, 1,024 positions (SGLang refuses a
``--context-length`` above the model's). The large one is the same architecture made wide
(hidden 2048) and deep enough for the size asked, written straight as bf16 safetensors shards
of zeros with their index, as ``save_pretrained`` lays them out: its only use is a weight load
that lasts long enough to be caught in the middle (SGLang's "Loading safetensors checkpoint
shards" bar, its schedulers' RSS climbing), and writing zeros costs no random numbers. Its
output is noise either way, which is all a test of process states needs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import vllm_model

VOCAB_SIZE = vllm_model.VOCAB_SIZE
MAX_POSITIONS = 1024
SHARDS = 8


def _config(hidden: int, intermediate: int, layers: int, heads: int) -> Dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": VOCAB_SIZE,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "head_dim": hidden // heads,
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
    }


def build_small(out: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**_config(hidden=64, intermediate=128, layers=2, heads=2))
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(str(out), safe_serialization=True)


def _tensors(cfg: Dict[str, Any]) -> List[Tuple[str, Tuple[int, ...]]]:
    """Every weight of a Llama checkpoint, in save_pretrained's order and names."""
    h, i, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    out: List[Tuple[str, Tuple[int, ...]]] = [("model.embed_tokens.weight", (v, h))]
    for n in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{n}."
        out += [
            (p + "input_layernorm.weight", (h,)),
            (p + "self_attn.q_proj.weight", (h, h)),
            (p + "self_attn.k_proj.weight", (h, h)),
            (p + "self_attn.v_proj.weight", (h, h)),
            (p + "self_attn.o_proj.weight", (h, h)),
            (p + "post_attention_layernorm.weight", (h,)),
            (p + "mlp.gate_proj.weight", (i, h)),
            (p + "mlp.up_proj.weight", (i, h)),
            (p + "mlp.down_proj.weight", (h, i)),
        ]
    return [*out, ("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]


def build_large(out: Path, gib: float) -> None:
    """A bf16 Llama of about ``gib`` GiB in ``SHARDS`` safetensors files, weights all zero."""
    import torch
    from safetensors.torch import save_file

    hidden, intermediate = 2048, 5632
    per_layer = 2 * (4 * hidden * hidden + 3 * hidden * intermediate)  # bytes in bf16
    layers = max(SHARDS, round(gib * (1 << 30) / per_layer))
    cfg = _config(hidden, intermediate, layers, heads=16)
    cfg["torch_dtype"] = "bfloat16"
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    names = _tensors(cfg)
    per_shard = -(-len(names) // SHARDS)
    weight_map: Dict[str, str] = {}
    total = 0
    for k in range(SHARDS):
        part = names[k * per_shard : (k + 1) * per_shard]
        if not part:
            break
        fname = f"model-{k + 1:05d}-of-{SHARDS:05d}.safetensors"
        tensors = {name: torch.zeros(shape, dtype=torch.bfloat16) for name, shape in part}
        for name in tensors:
            weight_map[name] = fname
        total += sum(t.numel() * 2 for t in tensors.values())
        save_file(tensors, str(out / fname), metadata={"format": "pt"})
    (out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2)
    )


def build(out: Path, gib: float = 0.0) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    vllm_model.build_tokenizer(out)
    if gib > 0:
        build_large(out, gib)
    else:
        build_small(out)
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False})
    )
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    size = float(args[args.index("--gib") + 1]) if "--gib" in args else 0.0
    print(build(Path(args[0]), size))
