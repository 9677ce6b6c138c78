"""Paged KV blocks: a free pool, reference counts and a prefix cache of full blocks.

A full block is cached under the key (content id of its parent block, its token ids); dict lookup compares the
whole key, so a hit is exact by construction. Content ids are never reused, so a key whose parent was evicted can
never match again. Unreferenced cached blocks stay in an LRU and are evicted only when a fresh block is needed.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from engine.sequence import Sequence

_ROOT = -1


@dataclass
class _Block:
    block_id: int
    ref_count: int = 0
    cid: int | None = None  # content id when registered in the prefix cache
    key: tuple[int, tuple[int, ...]] | None = None


@dataclass
class BlockStats:
    total: int
    peak_used: int = 0
    prefix_queries: int = 0  # prompt tokens looked up in the prefix cache
    prefix_hits: int = 0  # tokens served from it
    evictions: int = 0


class BlockManager:
    """Manages blocks 1..num_blocks of the pool; block 0 is the zeroed null block that padding points at."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True) -> None:
        if num_blocks < 1:
            raise ValueError("the KV cache must hold at least one block")
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [_Block(i) for i in range(num_blocks + 1)]
        self.free: OrderedDict[int, None] = OrderedDict((i, None) for i in range(1, num_blocks + 1))  # LRU: oldest first
        # Blocks handed out for the first time since start; the runner zeroes them before use (see take_fresh_blocks).
        self._ever_used = bytearray(num_blocks + 1)
        self._fresh: list[int] = []
        self.cached: dict[tuple[int, tuple[int, ...]], int] = {}
        self._next_cid = 0
        self.stats = BlockStats(total=num_blocks)
        self._inflight: dict[int, int] = {}  # chain hash of a block being prefilled -> count

    # ---- capacity -------------------------------------------------------------------------------------------
    @property
    def num_blocks(self) -> int:
        return len(self.blocks) - 1

    @property
    def num_free(self) -> int:
        return len(self.free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self.free)

    def blocks_needed(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    # ---- prefix cache ----------------------------------------------------------------------------------------
    def _block_tokens(self, seq: Sequence, i: int) -> tuple[int, ...]:
        bs = self.block_size
        return tuple(seq.token_ids[i * bs : (i + 1) * bs])

    def chain_hashes(self, seq: Sequence) -> list[int]:
        """Content hashes of the full blocks before the last token (for in-flight detection), memoised."""
        if seq.chain_cache is not None and seq.chain_cache[0] == seq.num_tokens:
            return seq.chain_cache[1]
        out, h = [], _ROOT
        for i in range((seq.num_tokens - 1) // self.block_size):
            h = hash((h, self._block_tokens(seq, i)))
            out.append(h)
        seq.chain_cache = (seq.num_tokens, out)
        return out

    def match_prefix(self, seq: Sequence) -> int:
        """Attach cached blocks to a sequence with no blocks; returns the number of cached tokens.

        The last token is always left to compute so its logits exist.
        """
        assert not seq.block_table
        if not self.enable_prefix_caching:
            return 0
        limit = (seq.num_tokens - 1) // self.block_size
        parent = _ROOT
        hits = 0
        for i in range(limit):
            bid = self.cached.get((parent, self._block_tokens(seq, i)))
            if bid is None:
                break
            block = self.blocks[bid]
            if block.ref_count == 0:
                self.free.pop(bid)
            block.ref_count += 1
            seq.block_table.append(bid)
            seq.block_cids.append(block.cid)  # type: ignore[arg-type]
            parent = block.cid  # type: ignore[assignment]
            hits += 1
        self._touch_peak()
        return hits * self.block_size

    def record_admission(self, num_tokens: int, num_cached: int) -> None:
        """Count a lookup once, when the sequence is actually admitted (deferred attempts do not count)."""
        self.stats.prefix_queries += num_tokens
        self.stats.prefix_hits += num_cached

    def first_uncached_hash(self, seq: Sequence, num_cached: int) -> int | None:
        """Chain hash of the first full block after the cached ones, if the prompt has one."""
        hashes = self.chain_hashes(seq)
        idx = num_cached // self.block_size
        return hashes[idx] if idx < len(hashes) else None

    def is_inflight(self, chain_hash: int | None) -> bool:
        return chain_hash is not None and self._inflight.get(chain_hash, 0) > 0

    def mark_inflight(self, hashes: list[int]) -> None:
        for h in hashes:
            self._inflight[h] = self._inflight.get(h, 0) + 1

    def clear_inflight(self, hashes: list[int]) -> None:
        for h in hashes:
            left = self._inflight.get(h, 0) - 1
            if left > 0:
                self._inflight[h] = left
            else:
                self._inflight.pop(h, None)

    def register_full_blocks(self, seq: Sequence) -> None:
        """Publish blocks whose KV is now fully written, so later requests can reuse them."""
        if not self.enable_prefix_caching:
            return
        full = seq.num_computed_tokens // self.block_size
        while len(seq.block_cids) < full:
            i = len(seq.block_cids)
            parent = seq.block_cids[-1] if seq.block_cids else _ROOT
            key = (parent, self._block_tokens(seq, i))
            existing = self.cached.get(key)
            if existing is not None:
                seq.block_cids.append(self.blocks[existing].cid)  # type: ignore[arg-type]
                continue
            block = self.blocks[seq.block_table[i]]
            if block.cid is not None:  # already published under another key: cannot happen for a fresh block
                seq.block_cids.append(block.cid)
                continue
            block.cid = self._next_cid
            block.key = key
            self._next_cid += 1
            self.cached[key] = block.block_id
            seq.block_cids.append(block.cid)

    def reset_prefix_cache(self) -> bool:
        """Forget every cached block (they stay allocated-free in the pool). Only while no sequence holds blocks:
        returns False and changes nothing otherwise."""
        if any(b.ref_count for b in self.blocks[1:]):
            return False
        for block in self.blocks:
            block.key = None
            block.cid = None
        self.cached.clear()
        return True

    # ---- allocation ------------------------------------------------------------------------------------------
    def can_grow(self, seq: Sequence, num_tokens: int) -> bool:
        return self.blocks_needed(num_tokens) - len(seq.block_table) <= len(self.free)

    def grow(self, seq: Sequence, num_tokens: int) -> bool:
        """Give `seq` enough blocks to hold `num_tokens` tokens; False (and nothing taken) if the pool is short."""
        need = self.blocks_needed(num_tokens) - len(seq.block_table)
        if need <= 0:
            return True
        if need > len(self.free):
            return False
        for _ in range(need):
            bid, _ = self.free.popitem(last=False)
            block = self.blocks[bid]
            if block.key is not None:
                self.cached.pop(block.key, None)
                block.key = None
                block.cid = None
                self.stats.evictions += 1
            block.ref_count = 1
            seq.block_table.append(bid)
            if not self._ever_used[bid]:
                self._ever_used[bid] = 1
                self._fresh.append(bid)
        self._touch_peak()
        return True

    def take_fresh_blocks(self) -> list[int]:
        """Blocks handed out for the first time since the last call. Their memory was never written (the pool is
        allocated uninitialised so RAM tracks blocks in use); attention reads whole blocks and masks the unwritten
        tail, which must therefore hold finite values, so the runner zeroes these once."""
        fresh, self._fresh = self._fresh, []
        return fresh

    def free_sequence(self, seq: Sequence) -> None:
        """Return a sequence's blocks; the tail goes first into the LRU so shared prefixes outlive it."""
        for bid in reversed(seq.block_table):
            block = self.blocks[bid]
            block.ref_count -= 1
            if block.ref_count == 0:
                if block.key is None:
                    self.free[bid] = None
                    self.free.move_to_end(bid, last=False)  # uncached blocks are reused first
                else:
                    self.free[bid] = None
        seq.block_table = []
        seq.block_cids = []

    def _touch_peak(self) -> None:
        used = self.num_used
        if used > self.stats.peak_used:
            self.stats.peak_used = used
