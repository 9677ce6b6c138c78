"""Seed the demo model with a previous-token circuit so copying does not wait out a long plateau.

A freshly initialised transformer learns to copy (induction heads) only after a long loss
plateau: the layer that must look at the previous token and the layer that must match on it
give each other no gradient until both exist. We hand-build the first half: layer 0's heads
attend to the token one (or two) positions back through RoPE and write that token's embedding
into a reserved part of the residual stream. Later layers then learn to match on it directly.
Training adjusts every weight afterwards; this is only an initialisation.

Layout of the residual stream at init: dims [0, TOKEN_DIMS) hold the token embedding, the last
dim holds a constant (lets a head's query/key be position-only), and the dims in between receive
the shifted copies.
"""

import math

import torch
from transformers import LlamaForCausalLM

TOKEN_DIMS = 128
CONST_VALUE = 0.3
SCORE_SCALE = 12.0  # sharpness of the positional attention (nats of margin at the target offset)


def _rope_freqs(model: LlamaForCausalLM, head_dim: int) -> torch.Tensor:
    theta = float(getattr(model.config, "rope_theta", None) or model.config.rope_parameters["rope_theta"])
    return theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)


@torch.no_grad()
def apply_copy_init(model: LlamaForCausalLM, offsets: tuple[int, ...] = (1, 1, 2), seed: int = 0) -> None:
    """Make layer-0 KV groups attend `offsets[g]` tokens back and copy 32-dim token slices forward."""
    cfg = model.config
    hidden, n_heads, n_kv = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads
    hd = hidden // n_heads
    group = n_heads // n_kv
    if len(offsets) > n_kv or TOKEN_DIMS + hd * len(offsets) > hidden - 1:
        raise ValueError("model too small for the copy init")
    gen = torch.Generator().manual_seed(seed)
    emb = model.model.embed_tokens.weight
    emb.zero_()
    emb[:, :TOKEN_DIMS] = torch.randn(emb.size(0), TOKEN_DIMS, generator=gen) * cfg.initializer_range
    const = hidden - 1
    emb[:, const] = CONST_VALUE

    attn = model.model.layers[0].self_attn
    freqs = _rope_freqs(model, hd)
    half = hd // 2
    # q . k after RoPE = sum_j A_j cos((m - n - offset) * f_j): peaks when the key is `offset` back.
    weights = torch.exp(-torch.arange(half, dtype=torch.float64) / 4.0)  # favour high frequencies
    # typical normalised constant activation: CONST_VALUE / rms(embedding row)
    rms = math.sqrt((CONST_VALUE**2 + TOKEN_DIMS * cfg.initializer_range**2) / hidden)
    c = CONST_VALUE / rms
    for g, off in enumerate(offsets):
        k_rows = slice(g * hd, (g + 1) * hd)
        attn.k_proj.weight[k_rows] = 0
        attn.k_proj.weight[g * hd: g * hd + half, const] = 1.0 / c
        attn.v_proj.weight[k_rows] = 0
        src = slice(g * hd % TOKEN_DIMS, g * hd % TOKEN_DIMS + hd)
        attn.v_proj.weight[k_rows, src] = torch.eye(hd)
        margin = sum(weights[j] * (1 - math.cos(freqs[j])) for j in range(half))
        amp = SCORE_SCALE * math.sqrt(hd) / float(margin) / c
        for h in range(g * group, (g + 1) * group):
            q_rows = slice(h * hd, (h + 1) * hd)
            attn.q_proj.weight[q_rows] = 0
            for j in range(half):
                attn.q_proj.weight[h * hd + j, const] = amp * weights[j] * math.cos(off * freqs[j])
                attn.q_proj.weight[h * hd + half + j, const] = -amp * weights[j] * math.sin(off * freqs[j])
            attn.o_proj.weight[:, h * hd:(h + 1) * hd] = 0
            if h == g * group:  # one writer per group, scaled back to the raw embedding's size
                dst = TOKEN_DIMS + g * hd
                attn.o_proj.weight[dst:dst + hd, h * hd:(h + 1) * hd] = torch.eye(hd) * rms
