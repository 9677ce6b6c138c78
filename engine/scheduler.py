"""Token-budget continuous batching.

Every step: running sequences first (decodes and unfinished prefill chunks, oldest first), then waiting ones fill
what is left of the token budget with (chunked) prefills. When blocks run out the newest running sequence is
preempted by recompute: its blocks are freed and it waits again with all its tokens, so no token ever changes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from engine.block_manager import BlockManager
from engine.sequence import Sequence, Status


@dataclass
class ScheduledBatch:
    seqs: list[Sequence] = field(default_factory=list)
    num_tokens: list[int] = field(default_factory=list)  # tokens computed for each sequence this step

    @property
    def total_tokens(self) -> int:
        return sum(self.num_tokens)

    def __len__(self) -> int:
        return len(self.seqs)


class Scheduler:
    def __init__(self, block_manager: BlockManager, max_num_seqs: int, max_num_batched_tokens: int) -> None:
        self.bm = block_manager
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0
        self.peak_running = 0
        self.failed: list[Sequence] = []  # sequences that can never fit, handed back to the engine once

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # ------------------------------------------------------------------------------------------------------------
    def schedule(self) -> ScheduledBatch:
        batch = ScheduledBatch()
        budget = self.max_num_batched_tokens
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed_tokens, budget)
            target = seq.num_computed_tokens + n
            scheduled = True
            while not self.bm.grow(seq, target):
                victim = self.running[-1]
                if victim is seq:
                    if i == 0:
                        self._fail(seq, "sequence outgrew the whole KV cache; raise kv_cache_memory or lower max_tokens")
                    else:
                        self._preempt(seq)
                    preempted = True
                    scheduled = False
                    break
                self._preempt(victim)
                preempted = True
            if not scheduled:
                break
            batch.seqs.append(seq)
            batch.num_tokens.append(n)
            budget -= n
            i += 1
        if not preempted:
            self._admit(batch, budget)
        self.peak_running = max(self.peak_running, len(self.running))
        return batch

    def _admit(self, batch: ScheduledBatch, budget: int) -> None:
        deferred: list[Sequence] = []
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if self.bm.blocks_needed(seq.num_tokens + 1) > self.bm.num_blocks:
                self.waiting.popleft()
                self._fail(seq, f"request needs {seq.num_tokens + 1} tokens of KV but the whole cache holds "
                                f"{self.bm.num_blocks * self.bm.block_size}; raise kv_cache_memory")
                continue
            cached = self.bm.match_prefix(seq)
            seq.num_computed_tokens = cached
            if self.bm.enable_prefix_caching and self.bm.is_inflight(self.bm.first_uncached_hash(seq, cached)):
                # Another request is prefilling this prefix right now; wait one step and reuse its blocks.
                self._release(seq)
                deferred.append(self.waiting.popleft())
                continue
            n = min(seq.num_tokens - cached, budget)
            if not self.bm.grow(seq, cached + n):
                self._release(seq)
                break
            self.waiting.popleft()
            self.bm.record_admission(seq.num_tokens, cached)
            seq.status = Status.RUNNING
            if seq.metrics.num_preemptions == 0:
                seq.metrics.num_cached_tokens = cached
            if self.bm.enable_prefix_caching:
                seq.inflight_hashes = self.bm.chain_hashes(seq)[cached // self.bm.block_size :]
                self.bm.mark_inflight(seq.inflight_hashes)
            self.running.append(seq)
            batch.seqs.append(seq)
            batch.num_tokens.append(n)
            budget -= n
        self.waiting.extendleft(reversed(deferred))

    # ------------------------------------------------------------------------------------------------------------
    def _release(self, seq: Sequence) -> None:
        self.bm.free_sequence(seq)
        seq.num_computed_tokens = 0
        if seq.inflight_hashes:
            self.bm.clear_inflight(seq.inflight_hashes)
            seq.inflight_hashes = []

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self._release(seq)
        seq.status = Status.WAITING
        seq.metrics.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    def _fail(self, seq: Sequence, message: str) -> None:
        if seq in self.running:
            self.running.remove(seq)
        self._release(seq)
        seq.status = Status.FINISHED
        seq.finish_reason = "error"
        seq.error = message
        self.failed.append(seq)

    def after_step(self, batch: ScheduledBatch) -> None:
        """Advance computed counts and publish newly full blocks to the prefix cache."""
        for seq, n in zip(batch.seqs, batch.num_tokens):
            seq.num_computed_tokens += n
            self.bm.register_full_blocks(seq)
            if seq.inflight_hashes and seq.num_computed_tokens >= seq.num_tokens:
                self.bm.clear_inflight(seq.inflight_hashes)
                seq.inflight_hashes = []

    def finish(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self._release(seq)
        seq.status = Status.FINISHED

    def take_failed(self) -> list[Sequence]:
        failed, self.failed = self.failed, []
        return failed
