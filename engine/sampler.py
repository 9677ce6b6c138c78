"""Picks the next tokens: greedy, or temperature / top-k / top-p with a per-request generator.

A sequence may sample several positions in one step (a verify step samples after each draft token); the result
is a list of tokens per sequence: greedy rows give every position's argmax (the caller keeps the drafts that
match), sampled rows go through rejection sampling, so speculation never changes the output distribution.
Problems confined to one request — non-finite logits, a grammar that allows no token — come back as that request's error, never as an exception that would end the whole batch.

Each request samples from its own seeded generator, so its tokens do not depend on what else is in the batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from engine.sampling_params import SamplingParams
from engine.sequence import Sequence
from engine.speculative.rejection import verify_drafts


@dataclass
class SampleResult:
    tokens: list[list[int]]  # per sampling sequence, one token per sampled position
    errors: list[str | None]  # per sampling sequence: why it cannot go on, or None
    logprobs: list[list[float]] | None = None  # per sampling sequence (empty unless its params ask for them)
    # row -> its params.logprobs most likely (token id, log-probability); rows of sequences asking k > 0 only
    top_logprobs: dict[int, list[tuple[int, float]]] | None = None


def _mask_banned(logits: torch.Tensor, seqs: list[Sequence], first_rows: list[int], counts: list[int],
                 eos_ids: list[int]) -> None:
    """Before min_tokens, EOS and stop token ids may not be sampled (a JSON grammar decides that by itself).
    Row j of a sequence follows j more output tokens than the sequence has verified."""
    for seq, row0, count in zip(seqs, first_rows, counts):
        p = seq.params
        if seq.matcher is not None or not p.min_tokens:
            continue
        banned = ([] if p.ignore_eos else eos_ids) + (p.stop_token_ids or [])
        if not banned:
            continue
        for j in range(count):
            if seq.num_output_tokens + j < p.min_tokens:
                logits[row0 + j, banned] = float("-inf")


def sampling_probs(logits: torch.Tensor, row_max: float, p: SamplingParams) -> torch.Tensor:
    """The distribution a request samples one position from: temperature, then top-k, then top-p. Scores are
    (logit - max) / T, so a tiny T cannot overflow: the best token scores 0 and the others tend to -inf, which is
    the greedy limit. Speculative decoding verifies drafts against exactly this distribution."""
    scores = (logits - row_max) / p.temperature
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
    return scores.softmax(-1)


def _sample_rows(logits: torch.Tensor, row0: int, count: int, maxima: list[float], seq: Sequence) -> list[int]:
    """One sampled token, or (with drafts) the drafts rejection sampling accepts plus the token after them."""
    probs = [sampling_probs(logits[r], maxima[r], seq.params) for r in range(row0, row0 + count)]
    if count == 1:
        return [int(torch.multinomial(probs[0], 1, generator=seq.generator).item())]
    q = seq.draft_probs[: count - 1] if seq.draft_probs is not None else None
    return verify_drafts(torch.stack(probs), seq.draft_ids[: count - 1], q, seq.generator)


def _apply_constraints(logits: torch.Tensor, seqs: list[Sequence], first_rows: list[int], counts: list[int],
                       structured: Any, errors: list[str | None]) -> None:
    """Rows with a JSON schema may only take tokens their grammar allows next. Row j of a verify step follows
    the sequence's first j drafts, so its mask is the grammar's state after them (the matcher itself only ever
    advances over accepted tokens)."""
    idx = [k for k, seq in enumerate(seqs) if seq.matcher is not None]
    if not idx:
        return
    if all(counts[k] == 1 for k in idx):
        mask = structured.allocate_mask(len(idx))
        structured.fill_masks([seqs[k].matcher for k in idx], mask)
        structured.apply_mask(logits, mask, [first_rows[k] for k in idx])
        return
    entries, rows = [], []
    for k in idx:
        entries.append((seqs[k].matcher, len(rows), seqs[k].draft_ids[: counts[k] - 1]))
        rows.extend(range(first_rows[k], first_rows[k] + counts[k]))
    mask = structured.allocate_mask(len(rows))
    structured.fill_masks_after_drafts(entries, mask)
    structured.apply_mask(logits, mask, rows)


def sample(logits: torch.Tensor, seqs: list[Sequence], counts: list[int], eos_ids: list[int],
           structured: Any = None) -> SampleResult:
    """logits: [sum(counts), vocab] float32, each sequence's rows contiguous (modified in place)."""
    first_rows, row = [], 0
    for c in counts:
        first_rows.append(row)
        row += c
    errors: list[str | None] = [None] * len(seqs)
    if not seqs:
        return SampleResult([], errors)
    # Normalisers of the raw rows, taken before any mask: the emitted token is never masked, so its raw logit is
    # still in place afterwards and logit - logsumexp is its log-probability under the model.
    want = [r for seq, row0, c in zip(seqs, first_rows, counts) if seq.params.logprobs is not None
            for r in range(row0, row0 + c)]
    lse = dict(zip(want, torch.logsumexp(logits[want], -1).tolist())) if want else {}
    top = _top_logprobs(logits, seqs, first_rows, counts, lse) if want else None
    _mask_banned(logits, seqs, first_rows, counts, eos_ids)
    if structured is not None:
        _apply_constraints(logits, seqs, first_rows, counts, structured, errors)
    # One pass gives the greedy tokens and exposes bad rows: NaN or +inf anywhere makes the max non-finite, and
    # a row whose every token is masked has max -inf.
    # One device-to-host read per step: the argmaxes and maxima travel together (float64 holds both exactly).
    row_max, best = logits.max(-1)
    best_and_max = torch.stack((best.to(torch.float64), row_max.to(torch.float64))).tolist()
    best_ids = [int(b) for b in best_and_max[0]]
    maxima = best_and_max[1]
    finite = [math.isfinite(m) for m in maxima]
    tokens: list[list[int]] = []
    for k, (seq, row0, count) in enumerate(zip(seqs, first_rows, counts)):
        rows = range(row0, row0 + count)
        if errors[k] is None and not all(finite[r] for r in rows):
            bad = next(r for r in rows if not finite[r])
            errors[k] = ("no token is allowed here (every logit is masked)" if maxima[bad] == float("-inf")
                         else "the model produced non-finite logits (NaN or inf)")
        if errors[k] is not None:
            tokens.append([])
        elif seq.params.greedy:
            tokens.append(best_ids[row0 : row0 + count])
        else:
            tokens.append(_sample_rows(logits, row0, count, maxima, seq))
    logprobs = [[float(logits[r, t]) - lse[r] for r, t in zip(range(row0, row0 + len(toks)), toks)]
                if seq.params.logprobs is not None else [] for seq, row0, toks in zip(seqs, first_rows, tokens)]
    return SampleResult(tokens, errors, logprobs, top or None)


def _top_logprobs(logits: torch.Tensor, seqs: list[Sequence], first_rows: list[int], counts: list[int],
                  lse: dict[int, float]) -> dict[int, list[tuple[int, float]]]:
    """Row -> its k most likely (token, log-probability) under the raw logits, for rows whose params ask k > 0;
    taken before any mask, like the emitted token's own log-probability."""
    ks = {r: min(seq.params.logprobs, logits.shape[-1]) for seq, row0, c in zip(seqs, first_rows, counts)
          if seq.params.logprobs for r in range(row0, row0 + c)}
    if not ks:
        return {}
    rows = list(ks)
    values, ids = torch.topk(logits[rows], max(ks.values()), dim=-1)
    return {r: [(int(t), float(v) - lse[r]) for t, v in zip(toks[: ks[r]], vals[: ks[r]])]
            for r, vals, toks in zip(rows, values.tolist(), ids.tolist())}
