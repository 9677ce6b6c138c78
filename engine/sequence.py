"""Per-request state the scheduler, block manager and runner share (a plain dataclass: hot path)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.outputs import RequestMetrics
from engine.sampling_params import SamplingParams


@dataclass
class PrefixState:
    """A sequence's prefix identity, read and written only by the KV-cache manager (engine/block_manager.py).

    `hashes`: the chain hash of each full block of token_ids (block i's covers blocks 0..i), built with
    `block_size`; cut by rollback, so it never describes tokens the sequence no longer has. `published`: leading
    blocks of the block table registered in (or taken from) the prefix cache. `inflight`: the prompt blocks this
    sequence is prefilling, which requests with the same prefix wait for instead of computing them again."""

    hashes: list[int] = field(default_factory=list)
    block_size: int = 0
    published: int = 0
    inflight: list[int] = field(default_factory=list)

    def cut(self, num_tokens: int) -> None:
        """Forget the hashes of blocks past the first `num_tokens` tokens."""
        if self.block_size:
            del self.hashes[num_tokens // self.block_size :]


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
    # per verified output token, the params.logprobs most likely (token id, log-probability) at its position
    output_top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    status: Status = Status.WAITING
    num_computed_tokens: int = 0  # leading tokens of token_ids whose KV is in the cache
    block_table: list[int] = field(default_factory=list)
    prefix: PrefixState = field(default_factory=PrefixState)
    admit_order: int | None = None  # first admission's rank: preemption picks the newest, re-admission keeps it
    finish_reason: str | None = None
    error: str | None = None
    stop_text_end: int | None = None  # where to cut the text when a stop string matched
    sample_index: int = 0  # which of its prompt's params.n samples this is

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
        del self.output_top_logprobs[self.num_output_tokens :]
        self.num_computed_tokens = min(self.num_computed_tokens, len(self.token_ids))
        self.prefix.cut(len(self.token_ids))
        self.clear_drafts()
