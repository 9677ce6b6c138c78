"""One rank's share of a context-parallel step, and rank 0's side of the runner interface EngineCore uses.

Rank 0 turns the scheduled batch into its `StepLayout` (engine/step_layout.py), broadcasts it, runs its own share like every other rank,
collects the hidden states of the rows that sample from the ranks that computed them and returns their logits.
The other ranks run `ContextParallelRunner.run_share` in a loop (engine/distributed/worker.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.distributed.attention import ContextParallelMetadata
from engine.distributed.comm import Comm
from engine.distributed.plan import RankLayout, build_layout
from engine.kv_pool import KVPool
from engine.models.llama import LlamaModel
from engine.models.rotary import rotary_tables
from engine.scheduler import ScheduledBatch
from engine.sequence import Sequence
from engine.step_layout import StepLayout, step_layout


@dataclass
class ContextParallelInputs:
    plan: StepLayout
    sampling_seqs: list[Sequence]
    sample_counts: list[int]


class ContextParallelRunner:
    """Owns this rank's KV pool shard (the same number of blocks on every rank: the same budget and shapes)."""

    def __init__(self, model: LlamaModel, comm: Comm, pool: KVPool, *, dtype: torch.dtype, device: torch.device,
                 max_model_len: int) -> None:
        cfg = model.cfg
        if cfg.sliding_window is not None:
            raise ValueError("context parallelism does not support sliding-window attention")
        self.model = model
        self.comm = comm
        self.device = device
        self.block_size = pool.block_size
        self.pool = pool
        self.kv_caches = self.pool.caches
        self.stride = self.pool.num_blocks + 1
        self.cos, self.sin = rotary_tables(cfg, max_model_len + 1, dtype, device)
        self.graphs = None  # decode graphs need one process (LLM.uses_cuda_graphs); the engine's stats read this

    # ---- every rank -------------------------------------------------------------------------------------------
    def layout(self, plan: StepLayout) -> RankLayout:
        return build_layout(plan, self.comm.rank, self.comm.world_size, self.stride, self.block_size, self.device)

    @torch.inference_mode()
    def run_share(self, plan: StepLayout) -> tuple[RankLayout, torch.Tensor]:
        """Compute this rank's rows of the step; returns its layout and the [rows, 2, hidden] (output, residual)
        of the sampling rows it owns, in plan order (rank 0: also the replicated ones)."""
        lay = self.layout(plan)
        meta = ContextParallelMetadata(slot_mapping=lay.slot_mapping, layout=lay)
        cos, sin = self.cos[lay.positions], self.sin[lay.positions]
        x, residual = self.model.hidden_states(lay.input_ids, cos, sin, self.kv_caches, meta)
        mine = [row for owner, row in lay.sample_rows if owner == self.comm.rank]
        idx = torch.tensor(mine, dtype=torch.long, device=self.device)
        return lay, torch.stack([x[idx], residual[idx]], dim=1)  # type: ignore[index]

    # ---- rank 0: the ModelRunner interface EngineCore drives ------------------------------------------------------
    def zero_blocks(self, block_ids: list[int]) -> None:
        """Nothing to zero: attention reads keys by exact slot, never padding."""

    def prepare(self, batch: ScheduledBatch) -> ContextParallelInputs:
        layout, sampling = step_layout(batch)  # at most one sampled position a chunk: no drafts here
        return ContextParallelInputs(layout, sampling, [c.num_sampled for c in layout.chunks if c.num_sampled])

    def execute(self, inputs: ContextParallelInputs) -> torch.Tensor:
        self.comm.broadcast_object(inputs.plan)
        lay, local = self.run_share(inputs.plan)
        hidden = local.new_empty((len(lay.sample_rows), 2, local.shape[-1]))
        owners = [owner for owner, _ in lay.sample_rows]
        hidden[[i for i, o in enumerate(owners) if o == 0]] = local
        for r in range(1, self.comm.world_size):
            at = [i for i, o in enumerate(owners) if o == r]
            if at:
                hidden[at] = self.comm.recv(local.new_empty((len(at), 2, local.shape[-1])), r)
        with torch.inference_mode():
            return self.model.logits(hidden[:, 0], hidden[:, 1])

    def close(self) -> None:
        """Tell the other ranks to exit (an empty plan)."""
        self.comm.broadcast_object(None)


def serve(runner: ContextParallelRunner) -> None:
    """The loop of every rank but 0: run each broadcast plan, send the sampling rows this rank owns to rank 0."""
    while True:
        plan = runner.comm.broadcast_object()
        if plan is None:
            return
        _, local = runner.run_share(plan)
        if local.shape[0]:
            runner.comm.send(local, 0)
