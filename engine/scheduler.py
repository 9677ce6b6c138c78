"""Token-budget continuous batching.

Every step: running sequences first (decodes, verify steps and unfinished prefill chunks, in admission order),
then waiting ones fill what is left of the token budget with (chunked) prefills. When blocks run out the most
recently admitted running sequence is preempted by recompute: its blocks are freed and it waits again with all
its tokens, so no token ever changes. A re-admitted sequence keeps its first admission's rank, so it is not the
next victim again and again: the oldest request always makes progress.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

from engine.block_manager import BlockManager
from engine.sequence import Sequence, Status

# Share of the pool admission leaves free, so running sequences can grow a few steps before anyone is preempted.
WATERMARK = 0.01


@dataclass
class ScheduledBatch:
    seqs: list[Sequence] = field(default_factory=list)
    num_tokens: list[int] = field(default_factory=list)  # query tokens computed for each sequence this step

    @property
    def total_tokens(self) -> int:
        return sum(self.num_tokens)

    def __len__(self) -> int:
        return len(self.seqs)


class Scheduler:
    def __init__(self, block_manager: BlockManager, max_num_seqs: int, max_num_batched_tokens: int) -> None:
        self.bm = block_manager
        # A running sequence needs at least one token of budget per step; more sequences than the budget can
        # serve would only hold blocks while they wait, so the budget also caps how many run at once.
        self.max_num_seqs = min(max_num_seqs, max_num_batched_tokens)
        self.max_num_batched_tokens = max_num_batched_tokens
        self.watermark_blocks = int(WATERMARK * block_manager.num_blocks)
        self.waiting: deque[Sequence] = deque()  # requests parked behind an in-flight prefix are the bm's
        self.running: list[Sequence] = []  # sorted by admit_order
        self._admitted = 0
        self.num_preemptions = 0
        self.peak_running = 0
        self.failed: list[Sequence] = []  # sequences that can never fit, handed back to the engine once

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running or self.bm.parked)

    def num_waiting(self) -> int:
        """Requests added and not yet scheduled: queued, or parked behind a prefix another one is prefilling."""
        return len(self.waiting) + sum(len(q) for q in self.bm.parked.values())

    # ------------------------------------------------------------------------------------------------------------
    def schedule(self) -> ScheduledBatch:
        batch = ScheduledBatch()
        budget = self.max_num_batched_tokens
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens + len(seq.draft_ids) - seq.num_computed_tokens, budget)
            scheduled = True
            while not self.bm.grow(seq, seq.num_computed_tokens + n):
                victim = self.running[-1]
                if victim is seq:
                    if i == 0:
                        self._fail(seq, "sequence outgrew the whole KV cache; raise kv_cache_memory (or "
                                        "memory_limit) or lower max_tokens")
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
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if self.bm.blocks_needed(seq.num_tokens + 1) > self.bm.num_blocks:
                self.waiting.popleft()
                self._fail(seq, f"request needs {seq.num_tokens + 1} tokens of KV but the whole cache holds "
                                f"{self.bm.num_blocks * self.bm.block_size}; raise kv_cache_memory (or memory_limit)")
                continue
            cached = self.bm.lookup(seq)
            if cached is None:  # another request is prefilling this prefix: parked until it is published
                self.waiting.popleft()
                continue
            seq.num_computed_tokens = cached
            n = min(seq.num_tokens - cached, budget)
            # Admission keeps a watermark of free blocks for the running sequences, unless nothing runs.
            reserve = self.watermark_blocks if self.running else 0
            if not (self.bm.can_grow(seq, cached + n, reserve) and self.bm.grow(seq, cached + n)):
                self._release(seq)
                break
            self.waiting.popleft()
            self.bm.start_prefill(seq, cached)
            seq.status = Status.RUNNING
            if seq.metrics.num_preemptions == 0:
                seq.metrics.num_cached_tokens = cached
            if seq.admit_order is None:
                seq.admit_order = self._admitted
                self._admitted += 1
            bisect.insort(self.running, seq, key=lambda s: s.admit_order)
            batch.seqs.append(seq)
            batch.num_tokens.append(n)
            budget -= n

    # ------------------------------------------------------------------------------------------------------------
    def _release(self, seq: Sequence) -> None:
        seq.num_computed_tokens = 0
        self._unpark(self.bm.release(seq))

    def _unpark(self, woken: list[Sequence]) -> None:
        """Requests whose awaited prefix is now cached go to the front of the queue, in the order they parked."""
        self.waiting.extendleft(reversed(woken))

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self._release(seq)
        seq.status = Status.WAITING
        seq.clear_drafts()
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

    def after_step(self, seq: Sequence) -> None:
        """A scheduled sequence's step is resolved (its tokens verified): publish its newly full blocks, and
        release its in-flight prefix marks once its prompt is in the cache."""
        self._unpark(self.bm.publish(seq))

    def finish(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self._release(seq)
        seq.status = Status.FINISHED

    def abort_all(self) -> None:
        """Free everything (the caller stopped consuming outputs)."""
        for seq in list(self.running):
            self.finish(seq)
        self.waiting.clear()
        self.bm.drop_requests()
        self.failed.clear()

    def take_failed(self) -> list[Sequence]:
        failed, self.failed = self.failed, []
        return failed
