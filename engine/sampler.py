"""Picks the next token per row: greedy, or temperature / top-k / top-p with a per-request generator.

Each request samples from its own seeded generator, so its tokens do not depend on what else is in the batch.
"""

from __future__ import annotations

from typing import Any

import torch

from engine.sequence import Sequence


def _mask_banned(logits: torch.Tensor, seqs: list[Sequence], eos_ids: list[int]) -> None:
    """Before min_tokens, EOS and stop token ids may not be sampled (a JSON grammar decides that by itself)."""
    for row, seq in enumerate(seqs):
        p = seq.params
        if seq.matcher is None and p.min_tokens and seq.num_output_tokens < p.min_tokens:
            banned = ([] if p.ignore_eos else eos_ids) + (p.stop_token_ids or [])
            if banned:
                logits[row, banned] = float("-inf")


def _sample_row(logits: torch.Tensor, seq: Sequence) -> int:
    p = seq.params
    scores = logits / p.temperature
    if 0 < p.top_k < scores.shape[-1]:
        kth = torch.topk(scores, p.top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if p.top_p < 1.0:
        sorted_scores, order = torch.sort(scores, descending=True)
        probs = sorted_scores.softmax(-1)
        cum = probs.cumsum(-1)
        drop = cum - probs > p.top_p  # keep the smallest prefix whose mass reaches top_p
        sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
        scores = torch.full_like(scores, float("-inf")).scatter(0, order, sorted_scores)
    probs = scores.softmax(-1)
    return int(torch.multinomial(probs, 1, generator=seq.generator).item())


def _apply_constraints(logits: torch.Tensor, seqs: list[Sequence], structured: Any) -> None:
    """Rows with a JSON schema may only take tokens their grammar allows next."""
    rows = [i for i, s in enumerate(seqs) if s.matcher is not None]
    if not rows:
        return
    mask = structured.allocate_mask(len(rows))
    structured.fill_masks([seqs[i].matcher for i in rows], mask)
    structured.apply_mask(logits, mask, rows)


def sample(logits: torch.Tensor, seqs: list[Sequence], eos_ids: list[int], structured: Any = None) -> list[int]:
    """logits: [len(seqs), vocab] float32 (modified in place)."""
    if not seqs:
        return []
    _mask_banned(logits, seqs, eos_ids)
    if structured is not None:
        _apply_constraints(logits, seqs, structured)
    if all(s.params.greedy for s in seqs):
        return logits.argmax(-1).tolist()
    greedy = logits.argmax(-1).tolist()
    out = []
    for row, seq in enumerate(seqs):
        out.append(greedy[row] if seq.params.greedy else _sample_row(logits[row], seq))
    return out
