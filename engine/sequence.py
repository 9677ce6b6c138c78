"""Per-request state the scheduler, block manager and runner share (a plain dataclass: hot path)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.outputs import RequestMetrics
from engine.sampling_params import SamplingParams


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    """`token_ids` holds only verified tokens (prompt + accepted output). `draft_ids` are proposed tokens a step
    computes and samples after without having accepted them yet (speculative decoding's seam; empty otherwise):
    a verify step is the last verified token plus k drafts as query tokens, with k + 1 sampled positions."""

    index: int  # position in the caller's input list
    prompt_ids: list[int]
    params: SamplingParams
    metrics: RequestMetrics
    generator: torch.Generator | None = None
    matcher: Any = None  # structured-output matcher when params.json_schema is set
    token_ids: list[int] = field(default_factory=list)  # prompt + verified output
    draft_ids: list[int] = field(default_factory=list)  # proposed, unverified tokens after token_ids
    # The proposal distribution of each draft ([len(draft_ids), vocab]) when a draft model sampled them; None when
    # the drafts are point masses (prompt lookup, grammar fast-forward, greedy drafting).
    draft_probs: torch.Tensor | None = None
    output_logprobs: list[float] = field(default_factory=list)  # per verified output token, when params.logprobs
    status: Status = Status.WAITING
    num_computed_tokens: int = 0  # leading tokens of token_ids whose KV is in the cache
    block_table: list[int] = field(default_factory=list)
    # Chain hash of each full block of token_ids (block i's hash covers blocks 0..i): the one prefix identity the
    # block manager, the prefix cache and in-flight deduplication share. Extended by BlockManager.block_hashes,
    # cut by rollback, so it never describes tokens the sequence no longer has.
    block_hashes: list[int] = field(default_factory=list)
    hash_block_size: int = 0  # the block size block_hashes was built with (set by the block manager)
    num_published_blocks: int = 0  # leading blocks of block_table registered in (or taken from) the prefix cache
    admit_order: int | None = None  # first admission's rank: preemption picks the newest, re-admission keeps it
    finish_reason: str | None = None
    error: str | None = None
    stop_text_end: int | None = None  # where to cut the text when a stop string matched
    inflight_hashes: list[int] = field(default_factory=list)  # prefix blocks this sequence is prefilling

    def __post_init__(self) -> None:
        if not self.token_ids:
            self.token_ids = list(self.prompt_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_ids)

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[len(self.prompt_ids) :]

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - len(self.prompt_ids)

    @property
    def is_finished(self) -> bool:
        return self.status is Status.FINISHED

    @property
    def is_prefilling(self) -> bool:
        return self.num_computed_tokens < self.num_prompt_tokens

    def query_tokens(self, start: int, end: int) -> list[int]:
        """Tokens at positions [start, end) of token_ids followed by draft_ids."""
        n = len(self.token_ids)
        if end <= n:
            return self.token_ids[start:end]
        return self.token_ids[start:] + self.draft_ids[max(0, start - n) : end - n]

    def clear_drafts(self) -> None:
        self.draft_ids = []
        self.draft_probs = None

    def append(self, tokens: list[int]) -> None:
        """Accept tokens as verified output."""
        self.token_ids.extend(tokens)

    def rollback(self, n: int) -> None:
        """Drop the last n output tokens (never prompt tokens), with the KV and block hashes that covered them."""
        if n <= 0:
            return
        if n > self.num_output_tokens:
            raise ValueError(f"cannot roll back {n} tokens: the sequence has {self.num_output_tokens} output tokens")
        del self.token_ids[len(self.token_ids) - n :]
        del self.output_logprobs[self.num_output_tokens :]
        self.num_computed_tokens = min(self.num_computed_tokens, len(self.token_ids))
        if self.hash_block_size:
            del self.block_hashes[len(self.token_ids) // self.hash_block_size :]
        self.clear_drafts()
