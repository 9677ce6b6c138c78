"""Reads a Hugging Face `config.json` into the few numbers our model needs; rejects what we cannot run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ModelLoadError

SUPPORTED_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
}

ROPE_SCALINGS = ("linear", "llama3", "yarn")  # the RoPE scalings engine.models.rotary computes


@dataclass(frozen=True)
class ModelConfig:
    architecture: str
    family: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool
    sliding_window: int | None
    torch_dtype: str | None
    eos_token_ids: tuple[int, ...]
    bos_token_id: int | None


def _as_id_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def _rope(raw: dict[str, Any]) -> tuple[float, dict[str, Any] | None]:
    """Accept both the classic (`rope_theta` + `rope_scaling`) and the newer `rope_parameters` layouts."""
    params = raw.get("rope_parameters")
    if isinstance(params, dict):
        theta = float(params.get("rope_theta", raw.get("rope_theta", 10000.0)))
        kind = params.get("rope_type", params.get("type", "default"))
        scaling = None if kind == "default" else dict(params)
        return theta, scaling
    scaling = raw.get("rope_scaling")
    if scaling is not None and scaling.get("rope_type", scaling.get("type", "default")) == "default":
        scaling = None
    return float(raw.get("rope_theta", 10000.0)), scaling


def load_model_config(model_dir: Path) -> ModelConfig:
    path = model_dir / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{model_dir}: no config.json (is this a Hugging Face model directory?)")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ModelLoadError(f"{path}: invalid JSON ({exc})") from exc
    archs = raw.get("architectures") or []
    arch = next((a for a in archs if a in SUPPORTED_ARCHITECTURES), None)
    if arch is None:
        raise ModelLoadError(
            f"{path}: unsupported architecture {archs or raw.get('model_type')!r}; "
            f"supported: {', '.join(sorted(SUPPORTED_ARCHITECTURES))}"
        )
    family = SUPPORTED_ARCHITECTURES[arch]
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise ModelLoadError(f"{path}: hidden_act {act!r} is not supported (only 'silu')")
    try:
        hidden = int(raw["hidden_size"])
        heads = int(raw["num_attention_heads"])
        cfg_fields = dict(
            vocab_size=int(raw["vocab_size"]),
            num_layers=int(raw["num_hidden_layers"]),
            intermediate_size=int(raw["intermediate_size"]),
            max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
        )
    except KeyError as exc:
        raise ModelLoadError(f"{path}: missing required field {exc.args[0]!r}") from exc
    theta, scaling = _rope(raw)
    if scaling is not None and scaling.get("rope_type", scaling.get("type")) not in ROPE_SCALINGS:
        raise ModelLoadError(f"{path}: rope scaling {scaling!r} is not supported "
                             f"(supported: {', '.join(ROPE_SCALINGS)}; "
                             "dynamic NTK changes the frequencies with the sequence length, which a paged KV cache "
                             "cannot follow)")
    sliding = raw.get("sliding_window")
    if family == "qwen2" and not raw.get("use_sliding_window", False):
        sliding = None
    eos = _as_id_list(raw.get("eos_token_id"))
    return ModelConfig(
        architecture=arch,
        family=family,
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=int(raw.get("num_key_value_heads") or heads),
        head_dim=int(raw.get("head_dim") or hidden // heads),
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        rope_theta=theta,
        rope_scaling=scaling,
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        qkv_bias=family == "qwen2" or bool(raw.get("attention_bias", False)),
        sliding_window=int(sliding) if sliding else None,
        torch_dtype=raw.get("torch_dtype") or raw.get("dtype"),
        eos_token_ids=tuple(eos),
        bos_token_id=raw.get("bos_token_id"),
        **cfg_fields,
    )
