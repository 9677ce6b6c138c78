"""Builds our model from Hugging Face-named weights (a safetensors directory, no pickle or remote code, or a GGUF
file via `engine.models.checkpoint`): shape checks, Q/K/V and gate/up fusion."""

from __future__ import annotations

from pathlib import Path

import torch

from engine.errors import ModelLoadError
from engine.models.checkpoint import Checkpoint
from engine.models.config import ModelConfig
from engine.models.llama import LlamaModel
from engine.models.lora import LoraAdapter, merge_lora
from engine.models.weight_layout import input_major_is_faster, store_input_major
from engine.quantization.model import attach_int8_weights, quantize_model
from kernels import Kernels

# Buffers some exporters save that carry no weights we need.
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


class _Weights:
    """Pops named tensors with shape checks, so every error names the tensor and both shapes."""

    def __init__(self, tensors: dict[str, torch.Tensor], source: Path, dtype: torch.dtype, device: torch.device) -> None:
        self.t = tensors
        self.dir = source
        self.dtype = dtype
        self.device = device

    def take(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        if name not in self.t:
            raise ModelLoadError(f"{self.dir}: missing weight {name!r}")
        w = self.t.pop(name)
        if tuple(w.shape) != shape:
            raise ModelLoadError(f"{self.dir}: weight {name!r} has shape {tuple(w.shape)}, expected {shape}")
        # int8 (pre-quantized checkpoints, engine.quantization) and their float32 scales keep their dtype.
        keep = w.dtype == torch.int8 or name.endswith("_scale")
        return w.to(device=self.device, dtype=w.dtype if keep else self.dtype)

    def leftovers(self) -> list[str]:
        return [n for n in self.t if not n.endswith(_IGNORED_SUFFIXES)]


def load_weights(
    cfg: ModelConfig, tensors: dict[str, torch.Tensor], source: Path, dtype: torch.dtype, device: torch.device
) -> tuple[dict[str, torch.Tensor], list[dict[str, torch.Tensor]]]:
    """Returns (global weights, per-layer weights) with Q/K/V and gate/up fused; `tensors` is consumed."""
    w = _Weights(tensors, source, dtype, device)
    h, d, i = cfg.hidden_size, cfg.head_dim, cfg.intermediate_size
    q_out, kv_out = cfg.num_heads * d, cfg.num_kv_heads * d
    glob = {
        "embed": w.take("model.embed_tokens.weight", (cfg.vocab_size, h)),
        "final_norm": w.take("model.norm.weight", (h,)),
    }
    if cfg.tie_word_embeddings:
        w.t.pop("lm_head.weight", None)
        glob["lm_head"] = glob["embed"]
    else:
        glob["lm_head"] = w.take("lm_head.weight", (cfg.vocab_size, h))
    layers = []
    for n in range(cfg.num_layers):
        p = f"model.layers.{n}."
        lw = {
            "qkv": torch.cat(
                [
                    w.take(p + "self_attn.q_proj.weight", (q_out, h)),
                    w.take(p + "self_attn.k_proj.weight", (kv_out, h)),
                    w.take(p + "self_attn.v_proj.weight", (kv_out, h)),
                ]
            ),
            "o": w.take(p + "self_attn.o_proj.weight", (h, q_out)),
            "gate_up": torch.cat(
                [w.take(p + "mlp.gate_proj.weight", (i, h)), w.take(p + "mlp.up_proj.weight", (i, h))]
            ),
            "down": w.take(p + "mlp.down_proj.weight", (h, i)),
            "input_norm": w.take(p + "input_layernorm.weight", (h,)),
            "post_norm": w.take(p + "post_attention_layernorm.weight", (h,)),
        }
        if cfg.qkv_bias:
            lw["qkv_bias"] = torch.cat(
                [
                    w.take(p + "self_attn.q_proj.bias", (q_out,)),
                    w.take(p + "self_attn.k_proj.bias", (kv_out,)),
                    w.take(p + "self_attn.v_proj.bias", (kv_out,)),
                ]
            )
        if p + "self_attn.q_proj.weight_scale" in w.t:  # pre-quantized int8 checkpoint: per-channel scales
            scales = {
                "qkv": [("self_attn.q_proj", q_out), ("self_attn.k_proj", kv_out), ("self_attn.v_proj", kv_out)],
                "o": [("self_attn.o_proj", h)],
                "gate_up": [("mlp.gate_proj", i), ("mlp.up_proj", i)],
                "down": [("mlp.down_proj", h)],
            }
            for key, parts in scales.items():
                lw[key + "_scale"] = torch.cat([w.take(f"{p}{mod}.weight_scale", (n,)) for mod, n in parts])
        layers.append(lw)
    extra = w.leftovers()
    if extra:
        shown = ", ".join(sorted(extra)[:5])
        raise ModelLoadError(f"{source}: unexpected weights for {cfg.architecture}: {shown}{' ...' if len(extra) > 5 else ''}")
    return glob, layers


def load_model(cfg: ModelConfig, tensors: dict[str, torch.Tensor], source: Path, dtype: torch.dtype,
               device: torch.device, kernels: Kernels) -> LlamaModel:
    glob, layers = load_weights(cfg, tensors, source, dtype, device)
    model = LlamaModel(cfg, kernels, glob, layers).eval()
    if layers and "qkv_scale" in layers[0]:  # pre-quantized: wrap the stored int8 weights, no re-quantization

        attach_int8_weights(model, layers)
    return model


def build_model(ckpt: Checkpoint, dtype: torch.dtype, device: torch.device, kernels: Kernels,
                quantization: str | None = None, lora: LoraAdapter | None = None) -> LlamaModel:
    """The runnable model of a checkpoint: a LoRA adapter merged into the float weights, then int8 if asked.
    A GGUF file asked for int8 is quantized tensor by tensor as it is dequantized (no float copy of the model),
    unless an adapter must first be merged."""
    tensors = ckpt.tensors(int8=ckpt.format == "gguf" and quantization == "int8" and lora is None)
    if lora is not None:
        merge_lora(tensors, lora)
    model = load_model(ckpt.config, tensors, ckpt.path, dtype, device, kernels)
    if quantization is not None:
        quantize_model(model, quantization)
    if device.type == "cpu" and dtype == torch.float32 and input_major_is_faster():
        store_input_major(model)
    return model


def num_weights(model: torch.nn.Module) -> int:
    """Weight elements, int8 buffers included: the size measure a draft model's cost is judged by."""
    return sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
