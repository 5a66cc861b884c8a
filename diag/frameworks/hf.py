"""Hugging Face loading: transformers' ``from_pretrained``, safetensors, the Hub's downloads
(huggingface_hub), tokenizers' Rust thread pool.

Facts from transformers 4.40-4.57 (modeling_utils.py, core_model_loading.py), safetensors
0.4, huggingface_hub 0.20-0.35 (file_download.py, _snapshot_download.py).
"""

from __future__ import annotations

from diag.frameworks.base import Pack

PACK = Pack(
    name="Hugging Face (transformers, safetensors, hub, tokenizers)",
    key="hf",
    modules=("transformers/", "safetensors/", "huggingface_hub/", "tokenizers/"),
    env=("HF_", "TOKENIZERS_PARALLELISM"),
    startup_frames=(
        (
            "loading weights",
            frozenset(
                {
                    "from_pretrained",
                    "load_checkpoint",
                    "load_file",
                    "safe_load_file",
                    "load_shard_file",
                    "_load_state_dict_into_meta_model",
                    "_load_pretrained_model",
                    "convert_and_load_state_dict_in_model",
                }
            ),
        ),
        (
            "downloading",
            frozenset(
                {
                    "hf_hub_download",
                    "snapshot_download",
                    "http_get",
                    "_download_to_tmp_and_move",
                    "download",
                }
            ),
        ),
    ),
    # A frame in safetensors' own code is loading, whatever its name.
    startup_files=(("loading weights", ("safetensors/",)),),
    # transformers >= 4.56 converts (renames, splits, quantizes) tensors while it loads them.
    loading_converts=("transformers/core_model_loading",),
    # The Hub's cache (and ModelScope's, a mirror users in China run), generic download dirs.
    download_dirs=("/huggingface/", "/hub/", "/.cache/", "/modelscope/", "/downloads/"),
    # The Hub's http_backoff logs the error before its "Retrying in 2s [Retry 2/5]."
    retry_lines=(r"thrown while requesting (?:GET|HEAD|POST|PUT)\b",),
    sources=("transformers 4.57 modeling_utils.py, core_model_loading.py; hf_hub 0.35",),
)
