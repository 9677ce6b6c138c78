"""Writes any checkpoint the engine loads (a GGUF file, say) as a plain Hugging Face directory: dequantized
safetensors, config.json, tokenizer.json/tokenizer_config.json (with the chat template) and
generation_config.json. transformers cannot do this for GGUF ("quantized with gguf and is not serializable"), and
baselines and users of other tools need the same weights the engine runs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from safetensors.torch import save_file

from engine.devices import DTYPES
from engine.models.checkpoint import open_checkpoint
from engine.models.config import ModelConfig
from engine.models.lora import merge_lora, read_lora

_MODEL_TYPES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2"}


def hf_config(cfg: ModelConfig, dtype: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "architectures": [cfg.architecture], "model_type": _MODEL_TYPES[cfg.architecture],
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.hidden_size, "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_heads, "num_key_value_heads": cfg.num_kv_heads, "head_dim": cfg.head_dim,
        "intermediate_size": cfg.intermediate_size, "hidden_act": "silu", "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta, "rope_scaling": cfg.rope_scaling,
        "max_position_embeddings": cfg.max_position_embeddings, "tie_word_embeddings": cfg.tie_word_embeddings,
        "bos_token_id": cfg.bos_token_id, "eos_token_id": list(cfg.eos_token_ids) or None, "torch_dtype": dtype,
    }
    if cfg.family == "llama":
        out["attention_bias"] = cfg.qkv_bias
    if cfg.family == "qwen2":
        out["use_sliding_window"] = cfg.sliding_window is not None
    if cfg.sliding_window is not None:
        out["sliding_window"] = cfg.sliding_window
    return out


def export_hf_checkpoint(model: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                         dtype: str = "float32", adapter: str | os.PathLike[str] | None = None) -> Path:
    """Dequantize `model` into `out_dir` (created; must be empty or absent), with a LoRA `adapter` directory merged
    into its weights as the engine merges it at load (so another tool runs the weights the engine runs). Returns
    `out_dir`."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    ckpt = open_checkpoint(model)
    lora = read_lora(adapter) if adapter is not None else None  # a malformed adapter fails before anything is written
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    tensors = ckpt.tensors()
    if lora is not None:
        merge_lora(tensors, lora)
    tensors = {name: t.to(DTYPES[dtype]).contiguous() for name, t in tensors.items()}
    if ckpt.config.tie_word_embeddings:
        tensors.pop("lm_head.weight", None)
    tmp = out / "model.safetensors.tmp"
    save_file(tensors, str(tmp), metadata={"format": "pt", "source": Path(model).name,
                                                     "adapter": Path(adapter).name if adapter else ""})
    os.replace(tmp, out / "model.safetensors")
    (out / "config.json").write_text(json.dumps(hf_config(ckpt.config, dtype), indent=2) + "\n")
    (out / "tokenizer.json").write_text(ckpt.tokenizer.to_json(), encoding="utf-8")
    tok_cfg = {k: v for k, v in ckpt.tokenizer.config.items() if v is not None}
    (out / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=2, ensure_ascii=False) + "\n",
                                               encoding="utf-8")
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": ckpt.config.bos_token_id, "eos_token_id": ckpt.eos_token_ids, "do_sample": False}) + "\n")
    return out


def load_tokenizer(model: str | os.PathLike[str]) -> Any:
    """The tokenizer (with its chat template) of a model directory or GGUF file, without loading weights."""
    return open_checkpoint(model).tokenizer
