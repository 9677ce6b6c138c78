"""The backend-neutral layout of one engine step: per scheduled sequence, the query tokens it computes, where they
go (its block table and first position) and how many of its last positions are sampled.

Every attention backend builds its own metadata from this one layout: the paged kernel sets (reference, CPU,
Triton) through `engine/model_runner.py` (decode rows grouped as the kernel's `DecodeLayout` says, prefill
segments, or a CUDA graph's static buffers), the context-parallel one on every rank through
`engine/distributed/plan.py` (it is what rank 0 broadcasts). The rule for which positions sample is here only.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.scheduler import ScheduledBatch
from engine.sequence import Sequence

# Chunks of at most this many query tokens (decodes, verify steps of speculative decoding, short prefill tails)
# run as decode rows: one row per query token, each reading its sequence's keys in place through the block table
# up to its own position (replicated over the ranks under context parallelism). Longer chunks run as prefill
# segments (GEMM-shaped attention; ring attention over the ranks).
MAX_DECODE_QUERIES = 8


@dataclass
class Chunk:
    block_table: list[int]  # the sequence's KV block ids (global ids under context parallelism)
    start: int  # position of the first query token
    tokens: list[int]  # query tokens at positions start, start + 1, ...
    num_sampled: int  # the chunk's last positions whose logits are sampled (0: none)

    @property
    def end(self) -> int:
        return self.start + len(self.tokens)

    @property
    def first_sampled(self) -> int:
        """The first sampled position (`end` when none is)."""
        return self.end - self.num_sampled

    @property
    def decode_rows(self) -> bool:
        """Whether the chunk runs as decode rows (see MAX_DECODE_QUERIES) rather than a prefill segment."""
        return len(self.tokens) <= MAX_DECODE_QUERIES


@dataclass
class StepLayout:
    chunks: list[Chunk]  # in the scheduled batch's order


def step_layout(batch: ScheduledBatch) -> tuple[StepLayout, list[Sequence]]:
    """The batch's layout, and the sequences that sample (in chunk order), for the sampler. A position samples
    only when the token there is the sequence's last verified token or a draft after it: never in the middle of a
    prompt, however the token budget cut the chunk."""
    chunks: list[Chunk] = []
    sampling: list[Sequence] = []
    for seq, n in zip(batch.seqs, batch.num_tokens):
        start = seq.num_computed_tokens
        num_sampled = max(0, start + n - max(start, seq.num_tokens - 1))
        chunks.append(Chunk(seq.block_table, start, seq.query_tokens(start, start + n), num_sampled))
        if num_sampled:
            sampling.append(seq)
    return StepLayout(chunks), sampling
