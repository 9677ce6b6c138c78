"""Llama-family decoder (Llama, Mistral, Qwen2) over one packed, unpadded batch of tokens per step.

Q/K/V and gate/up projections are fused at load time into one GEMM each. All numerics go through `kernels`.
"""

from __future__ import annotations

import torch
from torch import nn

from engine.models.config import ModelConfig
from engine.models.layers import Linear
from kernels import AttentionMetadata, Kernels


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, kernels: Kernels, w: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.cfg = cfg
        self.k = kernels
        self.q_size = cfg.num_heads * cfg.head_dim
        self.kv_size = cfg.num_kv_heads * cfg.head_dim
        self.scale = cfg.head_dim**-0.5
        self.qkv_proj = Linear(w["qkv"], w.get("qkv_bias"))
        self.o_proj = Linear(w["o"])
        self.gate_up_proj = Linear(w["gate_up"])
        self.down_proj = Linear(w["down"])
        self.input_norm = nn.Parameter(w["input_norm"], requires_grad=False)
        self.post_norm = nn.Parameter(w["post_norm"], requires_grad=False)

    def forward(
        self,
        x: torch.Tensor,
        residual: torch.Tensor | None,
        cos: torch.Tensor,
        sin: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        cfg, k = self.cfg, self.k
        h, residual = k.add_rms_norm(x, residual, self.input_norm, cfg.rms_norm_eps)
        qkv = self.qkv_proj(h)
        q, kk, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        n = q.shape[0]
        q = q.view(n, cfg.num_heads, cfg.head_dim)
        kk = kk.view(n, cfg.num_kv_heads, cfg.head_dim)
        v = v.view(n, cfg.num_kv_heads, cfg.head_dim)
        q, kk = k.apply_rotary(q, kk, cos, sin)
        k.store_kv(kk, v, k_cache, v_cache, meta.slot_mapping)
        attn = k.paged_attention(q, kk, v, k_cache, v_cache, meta, self.scale)
        x = self.o_proj(attn.reshape(n, self.q_size))
        h, residual = k.add_rms_norm(x, residual, self.post_norm, cfg.rms_norm_eps)
        x = self.down_proj(k.silu_and_mul(self.gate_up_proj(h)))
        return x, residual


class LlamaModel(nn.Module):
    def __init__(self, cfg: ModelConfig, kernels: Kernels, weights: dict[str, torch.Tensor], layers: list[dict[str, torch.Tensor]]) -> None:
        super().__init__()
        self.cfg = cfg
        self.k = kernels
        self.embed = nn.Parameter(weights["embed"], requires_grad=False)
        self.layers = nn.ModuleList(DecoderLayer(cfg, kernels, lw) for lw in layers)
        self.final_norm = nn.Parameter(weights["final_norm"], requires_grad=False)
        self.lm_head = Linear(weights["lm_head"])

    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
        meta: AttentionMetadata,
        logits_indices: torch.Tensor,
    ) -> torch.Tensor:
        """Returns float32 logits only for the rows in `logits_indices` (the tokens that sample)."""
        x, residual = self.hidden_states(input_ids, cos, sin, kv_caches, meta)
        return self.logits(x[logits_indices], residual[logits_indices] if residual is not None else None)

    def hidden_states(
        self,
        input_ids: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        kv_caches: list[tuple[torch.Tensor, torch.Tensor]],
        meta: AttentionMetadata,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The last layer's output and residual stream of every row (before the final norm)."""
        x = self.embed[input_ids]
        residual: torch.Tensor | None = None
        for layer, (kc, vc) in zip(self.layers, kv_caches):
            x, residual = layer(x, residual, cos, sin, kc, vc, meta)
        return x, residual

    def logits(self, x: torch.Tensor, residual: torch.Tensor | None) -> torch.Tensor:
        """float32 logits of the given rows of `hidden_states`' output."""
        h, _ = self.k.add_rms_norm(x, residual, self.final_norm, self.cfg.rms_norm_eps)
        return self.lm_head(h).float()
