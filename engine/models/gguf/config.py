"""GGUF hyperparameters (`<arch>.*` metadata) -> the engine's `ModelConfig`."""

from __future__ import annotations

from typing import Any

from engine.errors import ModelLoadError
from engine.models.config import ModelConfig
from engine.models.gguf.reader import GGUFFile

# llama.cpp architecture name -> (our Hugging Face architecture, family). llama.cpp's converter writes Mistral
# 7B-style models (and Llama 2/3, SmolLM) as "llama", Q/K rows permuted like Llama's.
GGUF_ARCHITECTURES = {
    "llama": ("LlamaForCausalLM", "llama"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
}

# general.file_type (llama_ftype) -> the dtype a float checkpoint was stored in. Quantized files say bfloat16, so
# dtype="auto" picks bf16 where the device runs it fast and float32 elsewhere (engine.devices.resolve_dtype).
_FLOAT_FILE_TYPES = {0: "float32", 1: "float16", 32: "bfloat16"}


def _rope_scaling(f: GGUFFile) -> dict[str, Any] | None:
    kind = f.arch_key("rope.scaling.type")
    if kind in (None, "none"):
        return None
    if kind == "linear":
        return {"rope_type": "linear", "factor": float(f.arch_key("rope.scaling.factor", 1.0))}
    raise ModelLoadError(f"{f.path}: rope scaling {kind!r} is not supported from GGUF (supported: linear)")


def gguf_model_config(f: GGUFFile) -> ModelConfig:
    arch = f.architecture
    if arch not in GGUF_ARCHITECTURES:
        raise ModelLoadError(
            f"{f.path}: unsupported GGUF architecture {arch!r}; supported: {', '.join(sorted(GGUF_ARCHITECTURES))}")
    if "rope_freqs.weight" in f.tensors:
        # Llama 3.1-style frequency factors: GGUF keeps only the resulting per-frequency factors, not the
        # llama3 scaling parameters our rotary tables are built from.
        raise ModelLoadError(f"{f.path}: per-frequency RoPE factors (rope_freqs.weight) are not supported yet")
    hf_arch, family = GGUF_ARCHITECTURES[arch]
    hidden = int(f.require("embedding_length"))
    heads = int(f.require("attention.head_count"))
    kv_heads = f.arch_key("attention.head_count_kv", heads)
    if isinstance(kv_heads, list):
        raise ModelLoadError(f"{f.path}: per-layer KV head counts are not supported")
    head_dim = int(f.arch_key("attention.key_length", hidden // heads))
    if int(f.arch_key("attention.value_length", head_dim)) != head_dim:
        raise ModelLoadError(f"{f.path}: key and value head sizes differ; not supported")
    rot = f.arch_key("rope.dimension_count", head_dim)
    if int(rot) != head_dim:
        raise ModelLoadError(f"{f.path}: partial rotary embeddings ({rot} of {head_dim} dims) are not supported")
    embed = f.tensors.get("token_embd.weight")
    if embed is None:
        raise ModelLoadError(f"{f.path}: no token_embd.weight tensor")
    tokens = f.metadata.get("tokenizer.ggml.tokens")
    vocab = int(f.arch_key("vocab_size", int(embed.shape[1]) if len(embed.shape) > 1 else len(tokens or [])))
    eos = [f.metadata[k] for k in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id")
           if k in f.metadata]
    sliding = f.arch_key("attention.sliding_window")
    file_type = f.metadata.get("general.file_type")
    return ModelConfig(
        architecture=hf_arch,
        family=family,
        vocab_size=vocab,
        hidden_size=hidden,
        num_layers=int(f.require("block_count")),
        num_heads=heads,
        num_kv_heads=int(kv_heads),
        head_dim=head_dim,
        intermediate_size=int(f.require("feed_forward_length")),
        rms_norm_eps=float(f.arch_key("attention.layer_norm_rms_epsilon", 1e-5)),
        rope_theta=float(f.arch_key("rope.freq_base", 10000.0)),
        rope_scaling=_rope_scaling(f),
        max_position_embeddings=int(f.arch_key("context_length", 2048)),
        tie_word_embeddings="output.weight" not in f.tensors,
        qkv_bias="blk.0.attn_q.bias" in f.tensors,
        sliding_window=int(sliding) if sliding else None,
        torch_dtype=_FLOAT_FILE_TYPES.get(int(file_type), "bfloat16") if file_type is not None else None,
        eos_token_ids=tuple(sorted({int(e) for e in eos})),
        bos_token_id=f.metadata.get("tokenizer.ggml.bos_token_id"),
    )
