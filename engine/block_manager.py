"""The KV-cache manager: paged blocks (a free pool, reference counts) and everything about prefix identity: block
hashing, the prefix cache of full blocks, the in-flight marks of prefixes being prefilled and the requests parked
until such a prefix is published. The scheduler asks it; nobody else reads a sequence's `PrefixState`.

A full block's identity is its chain hash: a 128-bit BLAKE2b digest of its parent's chain hash and its own token
ids, so one hash names the whole prefix up to the block's end. The same hashes key the prefix cache, the
in-flight deduplication of prefixes being prefilled, the parked requests and `Sequence.prefix.hashes`. A hit also compares the
block's stored token ids, so only a BLAKE2b collision of the parent chain could alias two prefixes. Unreferenced
cached blocks stay in an LRU and are evicted only when a fresh block is needed.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from dataclasses import dataclass

from engine.sequence import Sequence

_ROOT = 0


def chain_hash(parent: int, tokens: list[int]) -> int:
    """Hash of a block given its parent's chain hash (0 for the first block) and its token ids."""
    h = hashlib.blake2b(parent.to_bytes(16, "little"), digest_size=16)
    h.update(array("q", tokens).tobytes())
    return int.from_bytes(h.digest(), "little")


@dataclass
class _Block:
    block_id: int
    ref_count: int = 0
    hash: int | None = None  # chain hash while registered in the prefix cache
    tokens: tuple[int, ...] | None = None


@dataclass
class BlockStats:
    total: int
    peak_used: int = 0
    prefix_queries: int = 0  # prompt tokens looked up in the prefix cache
    prefix_hits: int = 0  # tokens served from it
    evictions: int = 0
    duplicates_dropped: int = 0  # full blocks computed twice, swapped for the cached copy


class FreeBlocks:
    """The free blocks, oldest first (an LRU: unreferenced cached blocks are evicted in that order), and where a
    new block comes from. One list in one process; one per rank, with its own placement, under context
    parallelism (engine/distributed/block_manager.py)."""

    def __init__(self, lists: list[OrderedDict[int, None]],
                 untouched: OrderedDict[int, None] | None = None) -> None:
        self.lists = lists
        # Blocks never handed out, taken only when no freed block is left (`single(touched_first=True)`).
        self.untouched: OrderedDict[int, None] = untouched if untouched is not None else OrderedDict()

    @classmethod
    def single(cls, num_blocks: int, touched_first: bool = False) -> FreeBlocks:
        """One list of blocks 1..num_blocks. With `touched_first` a freed block (cached or not) is reused before
        one never used: where the pool is memory the system commits only when a page is first written (a CPU
        pool), its resident size then follows the most blocks a run held at once instead of every block a long
        run ever filled (its cached prefixes are evicted sooner: the least recently used go first, so a prefix
        that every request shares stays)."""
        ids = OrderedDict((i, None) for i in range(1, num_blocks + 1))
        return cls([OrderedDict()], ids) if touched_first else cls([ids])

    def list_of(self, bid: int) -> OrderedDict[int, None]:
        """The list block `bid` belongs to."""
        return self.lists[0]

    def take_new(self, seq: Sequence, j: int, need: int) -> int:
        """A free block for the j-th of `need` new blocks of `seq` (its logical index is len(seq.block_table));
        placement policies use all three. Here: the oldest free block, a never-used one only when none is left."""
        free = self.lists[0]
        return (free if free or not self.untouched else self.untouched).popitem(last=False)[0]

    def remove(self, bid: int) -> None:
        """Block `bid` (free and cached) is referenced again."""
        self.list_of(bid).pop(bid)

    def put(self, bid: int, reuse_first: bool) -> None:
        """Block `bid` is free again: last in the LRU if it holds a cached prefix, else first (reused first)."""
        free = self.list_of(bid)
        free[bid] = None
        if reuse_first:
            free.move_to_end(bid, last=False)

    def __len__(self) -> int:
        return sum(len(f) for f in self.lists) + len(self.untouched)

    def note_usage(self) -> None:
        """Called whenever blocks were taken (per-list peaks are kept by those who report them)."""


class BlockManager:
    """Manages blocks 1..num_blocks of the pool; block 0 is the zeroed null block that padding points at."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True,
                 free: FreeBlocks | None = None, touched_first: bool = False) -> None:
        if num_blocks < 1:
            raise ValueError("the KV cache must hold at least one block")
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.free = free or FreeBlocks.single(num_blocks, touched_first)
        num_ids = max(max(f) for f in (*self.free.lists, self.free.untouched) if f) + 1
        self.blocks = [_Block(i) for i in range(num_ids)]
        # Blocks handed out for the first time since start; the runner zeroes them before use (see take_fresh_blocks).
        self._ever_used = bytearray(num_ids)
        self._fresh: list[int] = []
        self.cached: dict[int, int] = {}  # chain hash -> block id
        self.stats = BlockStats(total=len(self.free))
        self._inflight: dict[int, int] = {}  # chain hash of a block being prefilled -> count
        # Requests waiting for a prefix another request is prefilling, parked under that block's chain hash and
        # handed back (release/publish) when it is published: admission stays O(admitted), not O(waiting).
        self.parked: dict[int, list[Sequence]] = {}

    # ---- capacity -------------------------------------------------------------------------------------------
    @property
    def num_blocks(self) -> int:
        return self.stats.total

    @property
    def num_free(self) -> int:
        return len(self.free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - self.num_free

    def blocks_needed(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    # ---- prefix identity -------------------------------------------------------------------------------------
    def block_hashes(self, seq: Sequence, num_blocks: int) -> list[int]:
        """The chain hashes of seq's first `num_blocks` full blocks, extending `seq.prefix.hashes` as needed."""
        bs, hashes = self.block_size, seq.prefix.hashes
        seq.prefix.block_size = bs
        while len(hashes) < num_blocks:
            i = len(hashes)
            hashes.append(chain_hash(hashes[-1] if hashes else _ROOT, seq.token_ids[i * bs : (i + 1) * bs]))
        return hashes[:num_blocks]

    def prompt_block_hashes(self, seq: Sequence) -> list[int]:
        """Hashes of the full blocks before the last token (the ones a prefix hit or an in-flight prefill can cover)."""
        return self.block_hashes(seq, (seq.num_tokens - 1) // self.block_size)

    def _lookup(self, h: int, tokens: list[int]) -> int | None:
        bid = self.cached.get(h)
        if bid is None or self.blocks[bid].tokens != tuple(tokens):
            return None
        return bid

    def match_prefix(self, seq: Sequence) -> int:
        """Attach cached blocks to a sequence with no blocks; returns the number of cached tokens.

        The last token is always left to compute so its logits exist.
        """
        assert not seq.block_table
        if not self.enable_prefix_caching:
            return 0
        bs = self.block_size
        for i, h in enumerate(self.prompt_block_hashes(seq)):
            bid = self._lookup(h, seq.token_ids[i * bs : (i + 1) * bs])
            if bid is None:
                break
            self._take(bid)
            seq.block_table.append(bid)
        seq.prefix.published = len(seq.block_table)
        self._touch_peak()
        return len(seq.block_table) * bs

    def _take(self, bid: int) -> None:
        block = self.blocks[bid]
        if block.ref_count == 0:
            self.free.remove(bid)
        block.ref_count += 1

    # ---- admission: what the scheduler asks ------------------------------------------------------------------
    def lookup(self, seq: Sequence) -> int | None:
        """Attach the cached prefix of a waiting sequence; returns its cached tokens, or None when another request
        is prefilling the next block of its prompt right now: the sequence is then parked (holding no blocks)
        until that block is published, when `release` or `publish` hands it back."""
        cached = self.match_prefix(seq)
        if self.enable_prefix_caching:
            pending = self.first_uncached_hash(seq, cached)
            if pending is not None and self._inflight.get(pending, 0) > 0:
                self.free_sequence(seq)
                self.parked.setdefault(pending, []).append(seq)
                return None
        return cached

    def start_prefill(self, seq: Sequence, num_cached: int) -> None:
        """The sequence was admitted with `num_cached` tokens from the cache: count the lookup (once, deferred
        attempts do not count) and mark the prompt blocks it will compute as in flight."""
        self.stats.prefix_queries += seq.num_tokens
        self.stats.prefix_hits += num_cached
        if self.enable_prefix_caching:
            seq.prefix.inflight = self.prompt_block_hashes(seq)[num_cached // self.block_size :]
            for h in seq.prefix.inflight:
                self._inflight[h] = self._inflight.get(h, 0) + 1

    def release(self, seq: Sequence) -> list[Sequence]:
        """Free a sequence's blocks and in-flight marks (it finished, failed, was preempted or deferred); returns
        the parked sequences nobody blocks any more, for the front of the waiting queue."""
        self.free_sequence(seq)
        return self._clear_inflight(seq)

    def publish(self, seq: Sequence) -> list[Sequence]:
        """After a resolved step: publish the sequence's newly full blocks and, once its prompt is in the cache,
        release its in-flight marks; returns the parked sequences that may now run."""
        self.register_full_blocks(seq)
        return self._clear_inflight(seq) if not seq.is_prefilling else []

    def _clear_inflight(self, seq: Sequence) -> list[Sequence]:
        woken: list[Sequence] = []
        for h in seq.prefix.inflight:
            left = self._inflight.get(h, 0) - 1
            if left > 0:
                self._inflight[h] = left
            else:
                self._inflight.pop(h, None)
                woken.extend(self.parked.pop(h, ()))
        seq.prefix.inflight = []
        return woken

    def first_uncached_hash(self, seq: Sequence, num_cached: int) -> int | None:
        """Chain hash of the first full block after the cached ones, if the prompt has one."""
        hashes = self.prompt_block_hashes(seq)
        idx = num_cached // self.block_size
        return hashes[idx] if idx < len(hashes) else None

    def register_full_blocks(self, seq: Sequence) -> None:
        """Publish blocks whose KV is written for verified tokens, so later requests can reuse them.

        Only blocks covered by `seq.num_computed_tokens` (which never exceeds the verified tokens once a step is
        resolved) are published, so draft tokens' KV never reaches the cache. A block whose content is already
        cached (two requests prefilled the same prefix) is dropped for the cached copy: the sequence then holds
        one chain the cache knows, and its own copy goes back to the pool.
        """
        if not self.enable_prefix_caching:
            return
        full = min(seq.num_computed_tokens, seq.num_tokens) // self.block_size
        if seq.prefix.published >= full:
            return
        bs = self.block_size
        hashes = self.block_hashes(seq, full)
        for i in range(seq.prefix.published, full):
            tokens = seq.token_ids[i * bs : (i + 1) * bs]
            own = seq.block_table[i]
            existing = self._lookup(hashes[i], tokens)
            if existing is not None and existing != own:
                self._take(existing)
                seq.block_table[i] = existing
                self._release(own)
                self.stats.duplicates_dropped += 1
            elif existing is None:
                block = self.blocks[own]
                if block.hash is not None:  # a different content under this id cannot be cached: evicted already
                    self.cached.pop(block.hash, None)
                block.hash, block.tokens = hashes[i], tuple(tokens)
                self.cached[hashes[i]] = own
        seq.prefix.published = full

    def reset_prefix_cache(self) -> bool:
        """Forget every cached block (they stay allocated-free in the pool). Only while no sequence holds blocks:
        returns False and changes nothing otherwise."""
        if any(b.ref_count for b in self.blocks[1:]):
            return False
        for block in self.blocks:
            block.hash = None
            block.tokens = None
        self.cached.clear()
        return True

    def drop_requests(self) -> None:
        """Forget parked requests and in-flight marks (the caller aborted everything)."""
        self.parked.clear()
        self._inflight.clear()

    # ---- allocation ------------------------------------------------------------------------------------------
    def can_grow(self, seq: Sequence, num_tokens: int, reserve: int = 0) -> bool:
        return self.blocks_needed(num_tokens) - len(seq.block_table) + reserve <= self.num_free

    def grow(self, seq: Sequence, num_tokens: int) -> bool:
        """Give `seq` enough blocks to hold `num_tokens` tokens; False (and nothing taken) if the pool is short."""
        need = self.blocks_needed(num_tokens) - len(seq.block_table)
        if need <= 0:
            return True
        if need > self.num_free:
            return False
        for j in range(need):
            bid = self.free.take_new(seq, j, need)
            block = self.blocks[bid]
            if block.hash is not None:
                self.cached.pop(block.hash, None)
                block.hash = None
                block.tokens = None
                self.stats.evictions += 1
            block.ref_count = 1
            seq.block_table.append(bid)
            if not self._ever_used[bid]:
                self._ever_used[bid] = 1
                self._fresh.append(bid)
        self._touch_peak()
        return True

    def truncate(self, seq: Sequence, num_tokens: int) -> None:
        """Keep only the blocks that hold seq's first `num_tokens` token slots; the rest go back to the pool.

        Used after a step whose rejected draft tokens had blocks of their own. Blocks past the verified tokens
        were never published, so nothing unverified ever stays in the prefix cache."""
        keep, full = self.blocks_needed(num_tokens), num_tokens // self.block_size
        if seq.prefix.published > full and keep > full:
            # The cut falls inside a cached block other requests may share: the sequence would overwrite its tail,
            # so it lets go of that block and recomputes those few tokens into a block of its own.
            keep = full
            seq.num_computed_tokens = min(seq.num_computed_tokens, full * self.block_size)
        while len(seq.block_table) > keep:
            self._release(seq.block_table.pop())
        seq.prefix.published = min(seq.prefix.published, full)
        del seq.prefix.hashes[full:]

    def take_fresh_blocks(self) -> list[int]:
        """Blocks handed out for the first time since the last call. Their memory was never written (the pool is
        allocated uninitialised so RAM tracks blocks in use); attention reads whole blocks and masks the unwritten
        tail, which must therefore hold finite values, so the runner zeroes these once."""
        fresh, self._fresh = self._fresh, []
        return fresh

    def _release(self, bid: int) -> None:
        block = self.blocks[bid]
        block.ref_count -= 1
        if block.ref_count == 0:
            self.free.put(bid, reuse_first=block.hash is None)  # uncached blocks are reused first

    def free_sequence(self, seq: Sequence) -> None:
        """Return a sequence's blocks; the tail goes first into the LRU so shared prefixes outlive it."""
        for bid in reversed(seq.block_table):
            self._release(bid)
        seq.block_table = []
        seq.prefix.published = 0

    def _touch_peak(self) -> None:
        used = self.num_used
        if used > self.stats.peak_used:
            self.stats.peak_used = used
        self.free.note_usage()
