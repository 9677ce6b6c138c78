"""A small model with the target's tokenizer drafts tokens, with its own paged KV cache in the same engine.

Each target sequence has a shadow `Sequence` on the draft side: its tokens, its blocks in the draft pool and how
many of them the draft has computed. Before drafting, the shadow is brought level with the target's verified
tokens (plus any forced grammar tokens): everything up to the first token that differs keeps its KV, the rest is
recomputed in the same forward pass that drafts the first token. A shadow that cannot get blocks just drafts
nothing (the target never waits for the draft), and shadows of sequences that stopped running are freed.
"""

from __future__ import annotations

from typing import Any

import torch

from engine.block_manager import BlockManager
from engine.model_runner import ModelRunner
from engine.outputs import RequestMetrics
from engine.sampler import sampling_probs
from engine.scheduler import ScheduledBatch
from engine.sequence import Sequence


class DraftModelProposer:
    def __init__(self, runner: ModelRunner, target_vocab: int, max_batched_tokens: int) -> None:
        self.runner = runner
        self.bm = BlockManager(runner.pool.num_blocks, runner.block_size, enable_prefix_caching=False)
        self.vocab = target_vocab
        self.max_batched_tokens = max_batched_tokens
        self._shadows: dict[int, Sequence] = {}  # id(target sequence) -> its draft-side shadow
        # id(target sequence) -> how many of its tokens the shadow held when last levelled: target tokens only
        # grow, so those need no comparison again unless the target has since become shorter (rolled back).
        self._levelled: dict[int, int] = {}

    def release(self, keep: set[int]) -> None:
        for key in [k for k in self._shadows if k not in keep]:
            self._drop(key)

    def _drop(self, key: int) -> None:
        self.bm.free_sequence(self._shadows.pop(key))
        self._levelled.pop(key, None)

    def propose(self, seqs: list[Sequence], prefixes: list[list[int]], lengths: list[int],
                structured: Any) -> list[tuple[list[int], torch.Tensor | None]]:
        """Up to lengths[i] drafts after seqs[i]'s tokens + prefixes[i], each with its proposal distribution when
        the request samples (None when it is greedy: the drafts are argmaxes, point masses)."""
        drafts: list[list[int]] = [[] for _ in seqs]
        probs: list[list[torch.Tensor]] = [[] for _ in seqs]
        active: list[int] = []
        for i, (seq, prefix, k) in enumerate(zip(seqs, prefixes, lengths)):
            if k > 0 and self._sync(seq, seq.token_ids + prefix, k):
                active.append(i)
        advanced = [0] * len(seqs)  # tokens each matcher consumed tentatively (rolled back at the end)
        try:
            for i in active:
                if seqs[i].matcher is not None:
                    advanced[i] = seqs[i].matcher.advance(prefixes[i])
            budget = self.max_batched_tokens
            while active:
                batch = ScheduledBatch()
                for i in active:
                    sh = self._shadows[id(seqs[i])]
                    n = min(sh.num_tokens - sh.num_computed_tokens, budget)
                    if n <= 0:
                        continue
                    batch.seqs.append(sh)
                    batch.num_tokens.append(n)
                    budget -= n
                if not batch.seqs:
                    break
                rows, raw = self._forward(batch)
                owner = {id(self._shadows[id(seqs[i])]): i for i in active}
                sampled = [(owner[id(sh)], r) for sh, r in rows]
                logits = self._logits_rows(raw, sampled, seqs, structured)
                still = []
                for (i, _), row in zip(sampled, logits):
                    seq, sh = seqs[i], self._shadows[id(seqs[i])]
                    tok, q = self._pick(row, seq, sh.generator)
                    drafts[i].append(tok)
                    if q is not None:
                        probs[i].append(q)
                    sh.token_ids.append(tok)
                    ok = seq.matcher is None or seq.matcher.advance([tok]) == 1
                    advanced[i] += 1 if seq.matcher is not None and ok else 0
                    if ok and len(drafts[i]) < lengths[i]:
                        still.append(i)
                active = still
                budget = self.max_batched_tokens
        finally:
            for i, n in enumerate(advanced):
                if n:
                    seqs[i].matcher.rollback(n)
        return [(d, torch.stack(p) if p else None) for d, p in zip(drafts, probs)]

    def _sync(self, seq: Sequence, tokens: list[int], k: int) -> bool:
        """Level the shadow with `tokens`, keeping the KV of the common prefix; room for k drafts."""
        sh = self._shadows.get(id(seq))
        if sh is None:
            # The draft's own random stream, seeded from the request's, so seeded runs repeat exactly.
            gen = None
            if seq.generator is not None:
                gen = torch.Generator(device=seq.generator.device).manual_seed(
                    (seq.generator.initial_seed() * 1_000_003 + 17) & 0x7FFFFFFFFFFFFFFF)
            sh = Sequence(index=seq.index, prompt_ids=seq.prompt_ids, params=seq.params,
                          metrics=RequestMetrics(arrival_time=0.0), generator=gen)
            self._shadows[id(seq)] = sh
        old = sh.token_ids
        known = self._levelled.get(id(seq), 0)
        same = known if len(seq.token_ids) >= known else 0
        same = min(same, len(old), len(tokens))
        while same < len(old) and same < len(tokens) and old[same] == tokens[same]:
            same += 1
        sh.token_ids = list(tokens)
        self._levelled[id(seq)] = len(seq.token_ids)
        sh.num_computed_tokens = min(sh.num_computed_tokens, same, len(tokens) - 1)
        self.bm.truncate(sh, sh.num_computed_tokens)
        if not self.bm.grow(sh, len(tokens) + k - 1):
            self._drop(id(seq))
            return False
        return True

    def _forward(self, batch: ScheduledBatch) -> tuple[list[tuple[Sequence, int]], torch.Tensor]:
        """One draft forward: (shadow, logits row) for the shadows that reached their last token, and the logits."""
        fresh = self.bm.take_fresh_blocks()
        if fresh:
            self.runner.zero_blocks(fresh)
        inputs = self.runner.prepare(batch)
        logits = self.runner.execute(inputs)
        for sh, n in zip(batch.seqs, batch.num_tokens):
            sh.num_computed_tokens += n
        return [(sh, r) for r, sh in enumerate(inputs.sampling_seqs)], logits

    def _logits_rows(self, raw: torch.Tensor, sampled: list[tuple[int, int]], seqs: list[Sequence],
                     structured: Any) -> torch.Tensor:
        """Draft logits in the target's vocabulary, the grammar's mask applied where a request has a schema."""
        logits = raw[[r for _, r in sampled]].float()
        width = logits.shape[1]
        if width > self.vocab:
            logits = logits[:, : self.vocab]
        elif width < self.vocab:
            logits = torch.nn.functional.pad(logits, (0, self.vocab - width), value=float("-inf"))
        constrained = [k for k, (i, _) in enumerate(sampled) if seqs[i].matcher is not None]
        if constrained and structured is not None:
            mask = structured.allocate_mask(len(constrained))
            structured.fill_masks([seqs[sampled[k][0]].matcher for k in constrained], mask)
            structured.apply_mask(logits, mask, constrained)
        return logits

    @staticmethod
    def _pick(row: torch.Tensor, seq: Sequence, shadow_generator: torch.Generator | None
              ) -> tuple[int, torch.Tensor | None]:
        best_val, best = row.max(-1)
        if seq.params.greedy or not torch.isfinite(best_val):
            return int(best), None
        q = sampling_probs(row, float(best_val), seq.params)
        return int(torch.multinomial(q, 1, generator=shadow_generator).item()), q
