"""Seed the demo model with a working copy circuit so training does not wait out a long plateau.

A freshly initialised transformer learns to copy (induction heads) only after a long loss
plateau: the layer that must look at the previous token and the layer that must match on it
give each other no gradient until both exist. On this 2-core machine that plateau outlasted
our time budget (no copying after 1,000 steps), so we hand-build the circuit and let training
adapt it (train_model.py keeps layer 0's attention frozen; every other weight is trained):

- layer 0: position-only heads (query and key read a constant residual dimension; RoPE phases
  chosen so the score peaks at a fixed offset) attend one or two tokens back and write slices of
  that token's embedding into reserved residual dimensions;
- layer 1: content heads match the current token against the previous-token copy (using only
  the low-frequency RoPE pairs, which barely rotate over a document, hence rope_theta 1e6) and
  write the attended token's embedding back, so the tied LM head predicts "the token that
  followed the last occurrence of the current token" (an induction head);
- the remaining MLP and attention outputs start at zero so they do not drown the circuit.

Layout of the residual stream at init: dims [0, TOKEN_DIMS) hold the token embedding, the last
dim a constant, dims in between the shifted copies. With random tokens the untrained model
continues a repeated span with ~88% greedy accuracy 400 tokens later.
"""

import math

import torch
from transformers import LlamaForCausalLM

CONTENT_PAIRS = range(9, 16)  # RoPE pairs whose rotation stays small over ~1,500 tokens at theta 1e6
QUERY_SCALE = 15.0

TOKEN_DIMS = 127  # token embedding dims [0, 127); dim 127 holds the constant
CONST_VALUE = 0.3
SCORE_SCALE = 12.0  # sharpness of the positional attention (nats of margin at the target offset)


def _rope_freqs(model: LlamaForCausalLM, head_dim: int) -> torch.Tensor:
    theta = float(getattr(model.config, "rope_theta", None) or model.config.rope_parameters["rope_theta"])
    return theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)


@torch.no_grad()
def apply_copy_init(model: LlamaForCausalLM, offsets: tuple[int, ...] = (1, 2, 1, 3),
                    slices: tuple[int, ...] = (0, 0, 1, 0), seed: int = 0) -> None:
    """Make layer-0 KV group g attend `offsets[g]` tokens back and copy token-embedding slice
    `slices[g]` (32 dims) into residual dims TOKEN_DIMS + 32 g."""
    cfg = model.config
    hidden, n_heads, n_kv = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads
    hd = hidden // n_heads
    group = n_heads // n_kv
    if len(offsets) > n_kv or TOKEN_DIMS + 1 + hd * len(offsets) > hidden:
        raise ValueError("model too small for the copy init")
    gen = torch.Generator().manual_seed(seed)
    emb = model.model.embed_tokens.weight
    emb.zero_()
    emb[:, :TOKEN_DIMS] = torch.randn(emb.size(0), TOKEN_DIMS, generator=gen) * cfg.initializer_range
    const = TOKEN_DIMS
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
        src = slice(slices[g] * hd, (slices[g] + 1) * hd)
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
                dst = TOKEN_DIMS + 1 + g * hd
                attn.o_proj.weight[dst:dst + hd, h * hd:(h + 1) * hd] = torch.eye(hd) * rms


@torch.no_grad()
def apply_induction_init(model: LlamaForCausalLM, seed: int = 1) -> None:
    """Layer 1: each KV group matches the current token (token dims [0, 32)) against the copy of
    the token one back at each key position (layer-0 group 0's output) and copies a 32-dim slice
    of the attended token's embedding back into the token dims. (Also matching on the tokens two
    and three back was tried: it learned more slowly.)"""
    cfg = model.config
    hidden, n_heads, n_kv = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads
    hd = hidden // n_heads
    half, group = hd // 2, n_heads // n_kv
    dims = [j for j in CONTENT_PAIRS] + [j + half for j in CONTENT_PAIRS]
    gen = torch.Generator().manual_seed(seed)
    attn = model.model.layers[1].self_attn
    cur = slice(0, hd)  # current token, dims [0, 32)
    prev1 = slice(TOKEN_DIMS + 1, TOKEN_DIMS + 1 + hd)  # token one back, same dims (layer-0 group 0)
    for g in range(n_kv):
        # The shipped model was initialised with this exact sequence of draws; the first and the last
        # two matrices are unused now but still drawn so that `p1` comes out the same.
        torch.randn(len(dims), len(dims), generator=gen)
        p1 = torch.linalg.qr(torch.randn(hd, len(dims), generator=gen))[0].T  # (d, 32) orthonormal rows
        torch.randn(hd, len(dims), generator=gen)
        torch.randn(hd, len(dims), generator=gen)
        rows = slice(g * hd, (g + 1) * hd)
        attn.k_proj.weight[rows] = 0
        attn.v_proj.weight[rows] = 0
        for r, d in enumerate(dims):
            attn.k_proj.weight[g * hd + d, prev1] = p1[r]
        src = slice(hd * g, hd * g + hd)  # group 3's slice includes the constant dim: harmless, every logit gets it
        attn.v_proj.weight[rows, src] = torch.eye(hd)
        for h in range(g * group, (g + 1) * group):
            q_rows = slice(h * hd, (h + 1) * hd)
            attn.q_proj.weight[q_rows] = 0
            for r, d in enumerate(dims):
                attn.q_proj.weight[h * hd + d, cur] = p1[r] * QUERY_SCALE
            attn.o_proj.weight[:, q_rows] = 0
            if h == g * group:
                attn.o_proj.weight[src, q_rows] = torch.eye(hd)


@torch.no_grad()
def apply_copy_circuit(model: LlamaForCausalLM, seed: int = 0) -> None:
    """Previous-token heads, induction heads, and zeroed outputs elsewhere (see module docstring)."""
    apply_copy_init(model, seed=seed)
    cfg = model.config
    hd = cfg.hidden_size // cfg.num_attention_heads
    for i, layer in enumerate(model.model.layers):
        layer.mlp.down_proj.weight.zero_()
        if i >= 2:
            layer.self_attn.o_proj.weight.zero_()
    apply_induction_init(model, seed=seed + 1)
