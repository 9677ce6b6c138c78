"""Speculative sampling (Leviathan et al. 2023; Chen et al. 2023): verify drafts so the emitted tokens follow the
target distribution exactly.

Draft j is accepted with probability min(1, p_j(d_j) / q_j(d_j)); at the first rejection a token is drawn from the
residual max(p_j - q_j, 0), normalised; if every draft is accepted a bonus token is drawn from the last row. A
draft with no distribution (prompt lookup, grammar fast-forward) is a point mass: q_j(d_j) = 1, so it is accepted
with probability p_j(d_j) and the residual is p_j without d_j. Either way a rejected draft can never be the
resampled token, so the caller finds the accepted prefix by comparing tokens with drafts.
"""

from __future__ import annotations

import torch


def verify_drafts(probs: torch.Tensor, drafts: list[int], draft_probs: torch.Tensor | None,
                  generator: torch.Generator | None) -> list[int]:
    """probs: [len(drafts) + 1, vocab] target distributions (row j follows drafts[:j]); draft_probs: [len(drafts),
    vocab] proposal distributions or None for point masses. Returns the accepted drafts and one more token."""
    k = len(drafts)
    if k:
        dev = probs.device
        idx = torch.arange(k, device=dev)
        d = torch.tensor(drafts, dtype=torch.long, device=dev)
        p_d = probs[idx, d]
        q_d = draft_probs[idx, d] if draft_probs is not None else torch.ones_like(p_d)
        u = torch.rand(k, generator=generator, device=dev, dtype=probs.dtype)
        # u < p/q, written without the division so q_d = 0 (never proposed) cannot divide by zero.
        rejected = (u * q_d >= p_d).tolist()
        for j, rej in enumerate(rejected):
            if rej:
                residual = probs[j].clone()
                if draft_probs is not None:
                    residual = (residual - draft_probs[j]).clamp_min_(0)
                else:
                    residual[drafts[j]] = 0
                total = float(residual.sum())
                if total <= 0:  # p <= q everywhere but p(d) < q(d) cannot both hold; rounding only
                    residual = probs[j].clone()
                    residual[drafts[j]] = 0
                    total = float(residual.sum())
                tok = int(torch.multinomial(residual / total, 1, generator=generator).item()) if total > 0 else drafts[j]
                return drafts[:j] + [tok]
    return drafts + [int(torch.multinomial(probs[k], 1, generator=generator).item())]
