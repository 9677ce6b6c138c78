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
    index: int  # position in the caller's input list
    prompt_ids: list[int]
    params: SamplingParams
    metrics: RequestMetrics
    generator: torch.Generator | None = None
    matcher: Any = None  # structured-output matcher when params.json_schema is set
    token_ids: list[int] = field(default_factory=list)  # prompt + output
    status: Status = Status.WAITING
    num_computed_tokens: int = 0  # tokens whose KV is in the cache
    block_table: list[int] = field(default_factory=list)
    block_cids: list[int] = field(default_factory=list)  # content ids of this sequence's registered full blocks
    finish_reason: str | None = None
    error: str | None = None
    stop_text_end: int | None = None  # where to cut the text when a stop string matched
    inflight_hashes: list[int] = field(default_factory=list)  # prefix blocks this sequence is prefilling
    chain_cache: tuple[int, list[int]] | None = None  # (num_tokens, chain hashes) memo for admission checks

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
