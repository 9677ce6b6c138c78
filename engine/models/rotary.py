"""Rotary frequency tables, with the RoPE scaling a checkpoint's config asks for (linear, Llama 3, YaRN), computed
like Hugging Face transformers does so a long-context model reads past its pretraining length as it was trained to.

Dynamic NTK scaling is not offered: it changes the frequencies with the sequence's current length, so keys already
in a paged cache would have been rotated with other frequencies than the queries that read them."""

from __future__ import annotations

import math

import torch

from engine.models.config import ModelConfig


def rope_parameters(cfg: ModelConfig) -> tuple[torch.Tensor, float]:
    """(inverse frequencies, the factor cos and sin are multiplied by): 1.0 except for YaRN's attention factor."""
    dim = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim))
    scaling = cfg.rope_scaling
    if not scaling:
        return inv, 1.0
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "yarn":
        return _yarn(cfg, scaling)
    factor = float(scaling["factor"])
    if kind == "linear":
        return inv / factor, 1.0
    return _llama3(inv, scaling, factor), 1.0


def _yarn(cfg: ModelConfig, scaling: dict) -> tuple[torch.Tensor, float]:
    """YaRN (arXiv 2309.00071): per dimension, frequencies that rotate often enough within the original context are
    kept, slow ones interpolated by `factor`, a linear ramp in between; cos/sin scaled by the attention factor."""
    dim, base = cfg.head_dim, cfg.rope_theta
    original = float(scaling.get("original_max_position_embeddings") or cfg.max_position_embeddings)
    factor = float(scaling.get("factor") or cfg.max_position_embeddings / original)

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attention = scaling.get("attention_factor")
    if attention is None:
        m, m_all = scaling.get("mscale"), scaling.get("mscale_all_dim")
        attention = mscale(factor, m) / mscale(factor, m_all) if m and m_all else mscale(factor)
    beta_fast, beta_slow = float(scaling.get("beta_fast") or 32), float(scaling.get("beta_slow") or 1)

    def correction_dim(rotations: float) -> float:
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    keep = 1 - ramp
    return interpolation * (1 - keep) + extrapolation * keep, float(attention)


def _llama3(inv: torch.Tensor, scaling: dict, factor: float) -> torch.Tensor:
    """Llama 3: keep high frequencies, divide low ones by `factor`, blend smoothly in between."""
    low = float(scaling.get("low_freq_factor", 1.0))
    high = float(scaling.get("high_freq_factor", 4.0))
    old_len = float(scaling.get("original_max_position_embeddings", 8192))
    low_wavelen = old_len / low
    high_wavelen = old_len / high
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rotary_tables(cfg: ModelConfig, max_len: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables [max_len, head_dim] in `dtype`, indexed by position once per step."""
    inv, attention = rope_parameters(cfg)
    pos = torch.arange(max_len, dtype=torch.float32)
    freqs = pos[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return ((emb.cos() * attention).to(dtype=dtype, device=device),
            (emb.sin() * attention).to(dtype=dtype, device=device))
