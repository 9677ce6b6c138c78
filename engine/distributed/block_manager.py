"""The KV blocks of N context-parallel ranks, managed by rank 0 (which schedules for all of them).

Each rank's paged pool holds blocks 1..B of its own (block 0 is its null block). Rank 0 sees them as one id space,
global id = rank * (B + 1) + local id, so the scheduler, the prefix cache's chain hashes and `Sequence.block_table`
work unchanged; only where a new block lives is new. A block is owned by exactly one rank, which stores its KV and
computes the prefill rows whose KV it holds.

Placement: the new blocks of one step of a sequence (a prompt, or a chunk of one) are dealt out zigzag: cut into
2N contiguous chunks, rank r takes chunks r and 2N-1-r, so every rank gets an early and a late part and causal
attention work is balanced. Fewer new blocks than 2N (decode, short tails) go round-robin by logical block index,
so a long generation spreads evenly. A rank whose pool is full hands its turn to the rank with most free blocks;
prefix-cache hits stay wherever they were computed. Correctness never depends on placement: attention masks keys
by position, whichever rank holds them.
"""

from __future__ import annotations

from collections import OrderedDict

from engine.block_manager import BlockManager, FreeBlocks
from engine.sequence import Sequence


class RankedFreeBlocks(FreeBlocks):
    """One LRU free list per rank (global id = rank * stride + local id), with the zigzag placement above."""

    def __init__(self, num_ranks: int, blocks_per_rank: int) -> None:
        self.num_ranks = num_ranks
        self.stride = blocks_per_rank + 1
        super().__init__([OrderedDict((r * self.stride + i, None) for i in range(1, self.stride))
                          for r in range(num_ranks)])
        self.peak_used_by_rank = [0] * num_ranks

    def list_of(self, bid: int) -> OrderedDict[int, None]:
        return self.lists[bid // self.stride]

    def placement(self, seq: Sequence, j: int, need: int) -> int:
        """The rank that should hold the j-th of `need` new blocks of `seq` (see the module docstring)."""
        n = self.num_ranks
        if need >= 2 * n:
            chunk = j * 2 * n // need
            return chunk if chunk < n else 2 * n - 1 - chunk
        return len(seq.block_table) % n

    def take_new(self, seq: Sequence, j: int, need: int) -> int:
        rank = self.placement(seq, j, need)
        if not self.lists[rank]:  # that rank is full: the rank with most free blocks takes its turn
            rank = max(range(self.num_ranks), key=lambda r: len(self.lists[r]))
        return self.lists[rank].popitem(last=False)[0]

    def used_by_rank(self) -> list[int]:
        return [self.stride - 1 - len(f) for f in self.lists]

    def note_usage(self) -> None:
        for r, used in enumerate(self.used_by_rank()):
            if used > self.peak_used_by_rank[r]:
                self.peak_used_by_rank[r] = used


class ShardedBlockManager(BlockManager):
    """The KV-cache manager of N ranks: the same prefix identity and accounting, over ranked free lists."""

    def __init__(self, num_ranks: int, blocks_per_rank: int, block_size: int,
                 enable_prefix_caching: bool = True) -> None:
        if num_ranks < 1 or blocks_per_rank < 1:
            raise ValueError("each rank's KV cache must hold at least one block")
        self.ranked = RankedFreeBlocks(num_ranks, blocks_per_rank)
        super().__init__(num_ranks * blocks_per_rank, block_size, enable_prefix_caching, free=self.ranked)

    @property
    def stride(self) -> int:
        """Global ids per rank (its blocks and its null block)."""
        return self.ranked.stride

    def rank_of(self, bid: int) -> int:
        return bid // self.ranked.stride

    def local_id(self, bid: int) -> int:
        return bid % self.ranked.stride

    def used_by_rank(self) -> list[int]:
        return self.ranked.used_by_rank()

    @property
    def peak_used_by_rank(self) -> list[int]:
        return self.ranked.peak_used_by_rank
