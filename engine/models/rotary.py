"""Rotary frequency tables, including Llama 3 and linear scaling, computed like Hugging Face does."""

from __future__ import annotations

import math

import torch

from engine.models.config import ModelConfig


def inverse_frequencies(cfg: ModelConfig) -> torch.Tensor:
    dim = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim))
    scaling = cfg.rope_scaling
    if not scaling:
        return inv
    kind = scaling.get("rope_type", scaling.get("type"))
    factor = float(scaling["factor"])
    if kind == "linear":
        return inv / factor
    # llama3: keep high frequencies, divide low ones by `factor`, blend smoothly in between.
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
    inv = inverse_frequencies(cfg)
    pos = torch.arange(max_len, dtype=torch.float32)
    freqs = pos[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype=dtype, device=device), emb.sin().to(dtype=dtype, device=device)
