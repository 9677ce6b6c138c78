"""The interface the step loop (`EngineCore`) drives: `ModelRunner` (one process) and the context-parallel runner
(engine/distributed/runner.py) both implement it, so the loop, the scheduler and the sampler never know which
one runs the model."""

from __future__ import annotations

from typing import Any, Protocol

import torch

from engine.kv_pool import KVPool
from engine.scheduler import ScheduledBatch
from engine.sequence import Sequence


class StepInputsLike(Protocol):
    """What the loop reads back from a prepared step: the sequences that sample and how many rows each."""

    sampling_seqs: list[Sequence]
    sample_counts: list[int]


class Runner(Protocol):
    model: Any
    pool: KVPool
    kv_caches: list[tuple[torch.Tensor, torch.Tensor]]
    graphs: Any  # engine.decode_graphs.DecodeGraphs or None

    def zero_blocks(self, block_ids: list[int]) -> None:
        """Prepare blocks handed out for the first time (zero them where the attention kernel reads padding)."""

    def prepare(self, batch: ScheduledBatch) -> StepInputsLike:
        """Pack a scheduled batch into this runner's step inputs."""

    def execute(self, inputs: Any) -> torch.Tensor:
        """Run the step; the logits of the sampling rows, in `sampling_seqs` order."""

    def close(self) -> None:
        """Release what the runner holds outside this process (other ranks); may be a no-op."""
