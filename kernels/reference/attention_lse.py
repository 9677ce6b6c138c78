"""Attention over an arbitrary key set that also returns its log-sum-exp, and the exact merge of such partials.

Context parallelism splits one sequence's keys over several ranks: each rank attends to the keys it holds and
returns (output, LSE); the full attention is the LSE-weighted merge of the partials, which is exact up to float
rounding because softmax over a union of key sets factorises through the per-set normalisers. Everything here
computes in float32 whatever the model dtype, so merged outputs stay within float32 rounding of single-process
attention. Keys are masked by position (a key at position k is visible to a query at position q iff k <= q), which
covers causal prefill, cached context, decode rows and keys that arrive in any order.
"""

from __future__ import annotations

import torch

# Query rows and key columns per tile: scores of one tile are [kv_heads, group * Q_TILE, K_TILE] float32.
Q_TILE = 256
K_TILE = 512


def attention_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """q: [n, Hq, D]; k, v: [Hkv, L, D] (the pool's head-major layout); q_pos: [n], k_pos: [L] int64 positions of
    one sequence.

    Returns (out [n, Hq, D] float32, lse [n, Hq] float32). A query that sees no key gets out 0 and lse -inf, the
    neutral element of `merge_lse`. Tiles over queries and keys (online softmax), so memory stays bounded for
    long sequences; a tile whose keys all lie after its queries is skipped and one whose keys all precede them is
    not masked, which is what makes causal (and zigzag) layouts cost about half of the full square."""
    n, num_heads, dim = q.shape
    kv_heads = k.shape[0]
    group = num_heads // kv_heads
    out = torch.zeros((n, num_heads, dim), dtype=torch.float32, device=q.device)
    lse = torch.full((n, num_heads), float("-inf"), dtype=torch.float32, device=q.device)
    if n == 0 or k.shape[1] == 0:
        return out, lse
    kf = k.to(torch.float32)
    vf = v.to(torch.float32)
    for qs in range(0, n, Q_TILE):
        qe = min(n, qs + Q_TILE)
        b = qe - qs
        qb = (q[qs:qe].to(torch.float32) * scale).view(b, kv_heads, group, dim).permute(1, 2, 0, 3)
        qb = qb.reshape(kv_heads, group * b, dim)
        qp = q_pos[qs:qe]
        q_lo, q_hi = int(qp.min()), int(qp.max())
        acc: torch.Tensor | None = None
        run_lse = torch.full((kv_heads, group * b), float("-inf"), dtype=torch.float32, device=q.device)
        for ks in range(0, kf.shape[1], K_TILE):
            ke = min(kf.shape[1], ks + K_TILE)
            kp = k_pos[ks:ke]
            k_lo, k_hi = int(kp.min()), int(kp.max())
            if k_lo > q_hi:
                continue  # every key after every query
            scores = torch.bmm(qb, kf[:, ks:ke].transpose(1, 2))  # [Hkv, group * b, keys]
            if k_hi > q_lo:  # some keys after some queries
                hidden = kp[None, :] > qp[:, None]  # [b, keys]
                scores.view(kv_heads, group, b, ke - ks).masked_fill_(hidden[None, None], float("-inf"))
            tile_out, tile_lse = _softmax_times_v(scores, vf[:, ks:ke])
            if acc is None:
                acc, run_lse = tile_out, tile_lse
            else:
                acc, run_lse = _merge_pair(acc, run_lse, tile_out, tile_lse)
        if acc is not None:
            out[qs:qe] = acc.view(kv_heads, group, b, dim).permute(2, 0, 1, 3).reshape(b, num_heads, dim)
            lse[qs:qe] = run_lse.view(kv_heads, group, b).permute(2, 0, 1).reshape(b, num_heads)
    return out, lse


def _softmax_times_v(scores: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(scores) @ v and the rows' LSE, consuming `scores` ([..., keys], -inf where masked). A row with no
    visible key gives 0 and -inf."""
    m = _finite(scores.amax(dim=-1, keepdim=True))
    probs = scores.sub_(m).exp_()
    total = probs.sum(dim=-1, keepdim=True)
    out = torch.matmul(probs, v) / torch.where(total == 0, torch.ones_like(total), total)
    return out, (m + total.log()).squeeze(-1)


def attention_lse_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor,
                       scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Each query row with keys of its own (decode rows of different sequences in one call).

    q: [R, Hq, D]; k, v: [Hkv, R, L, D] (row r's keys, padded to L); q_pos: [R]; k_pos: [R, L] (padding: any
    position greater than the row's q_pos). Returns (out [R, Hq, D] float32, lse [R, Hq] float32)."""
    rows, num_heads, dim = q.shape
    kv_heads = k.shape[0]
    group = num_heads // kv_heads
    if rows == 0 or k.shape[2] == 0:
        return (torch.zeros((rows, num_heads, dim), dtype=torch.float32, device=q.device),
                torch.full((rows, num_heads), float("-inf"), dtype=torch.float32, device=q.device))
    qg = (q.to(torch.float32) * scale).view(rows, kv_heads, group, dim).permute(1, 0, 2, 3)  # [Hkv, R, group, D]
    scores = torch.matmul(qg, k.to(torch.float32).transpose(-1, -2))  # [Hkv, R, group, L]
    hidden = k_pos > q_pos[:, None]  # [R, L]
    scores.masked_fill_(hidden[None, :, None, :], float("-inf"))
    out, lse = _softmax_times_v(scores, v.to(torch.float32))  # [Hkv, R, group, D], [Hkv, R, group]
    return (out.permute(1, 0, 2, 3).reshape(rows, num_heads, dim),
            lse.permute(1, 0, 2).reshape(rows, num_heads))


def _finite(lse: torch.Tensor) -> torch.Tensor:
    """-inf (no visible key) replaced by 0 so that exp(scores - lse) gives 0 rather than NaN."""
    return torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)


def _merge_pair(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor,
                lse_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge two normalised partial outputs [..., D] with their LSEs [...]; either side may be empty (-inf)."""
    lse = torch.logaddexp(lse_a, lse_b)
    safe = _finite(lse)
    wa = torch.exp(lse_a - safe)
    wb = torch.exp(lse_b - safe)
    return out_a * wa[..., None] + out_b * wb[..., None], lse


def merge_lse(outs: list[torch.Tensor], lses: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge partial attentions over disjoint key sets, in list order (the same order on every rank gives
    bit-identical results everywhere). outs: [..., D] float32; lses: [...] float32."""
    out, lse = outs[0], lses[0]
    for o, s in zip(outs[1:], lses[1:]):
        out, lse = _merge_pair(out, lse, o, s)
    return out, lse
