"""Turns a scheduled batch into one packed forward pass: token ids, positions, cache slots, attention layout.

Index tensors are built once per step from Python lists (O(batch + new tokens)), reach the device in one copy and
are shared by all layers; decode-only steps may instead replay a CUDA graph (engine/decode_graphs.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.decode_graphs import DecodeGraphs
from engine.kv_pool import KVPool
from engine.models.llama import LlamaModel
from engine.models.rotary import rotary_tables
from engine.scheduler import ScheduledBatch
from engine.sequence import Sequence
from engine.step_layout import Chunk, step_layout
from engine.step_upload import upload_int64
from kernels import AttentionMetadata, DecodeGroup, PrefillSegment
from kernels.decode_layout import PADDED_BLOCK_READS, DecodeLayout


@dataclass
class StepInputs:
    input_ids: torch.Tensor
    positions: torch.Tensor
    meta: AttentionMetadata
    logits_indices: torch.Tensor
    # The sequences that sample this step and how many positions each samples, in logits row order (a
    # sequence's rows are contiguous, in position order).
    sampling_seqs: list[Sequence]
    sample_counts: list[int]
    # Set when the step's rows sit in a decode graph's static buffers (the tensors above are then empty): the
    # bucket to replay.
    graph_size: int | None = None


@dataclass
class HostStep:
    """One step's index lists on the host, before the one copy to the device: decode rows first, then the prefill
    segments' rows."""

    ids: list[int]
    pos: list[int]
    slots: list[int]
    kv_lens: list[int]  # per decode row
    logits_rows: list[int]  # rows whose logits are sampled
    groups: list[tuple[int, int]]  # decode row ranges attention reads as one group
    tables: list[list[int]]  # block table per decode row
    segments: list[tuple[Chunk, int]]  # (chunk, first row) per prefill segment
    sampling: list[Sequence]
    counts: list[int]  # sampled rows per sampling sequence


class ModelRunner:
    """Owns the model's step-time state: the KV pool (allocated by engine/build.py from the configured budget) and
    the rotary tables."""

    def __init__(self, model: LlamaModel, pool: KVPool, *, dtype: torch.dtype, device: torch.device,
                 max_model_len: int, decode_layout: DecodeLayout = PADDED_BLOCK_READS) -> None:
        cfg = model.cfg
        self.model = model
        self.pool = pool
        self.kv_caches = self.pool.caches
        self.cos, self.sin = rotary_tables(cfg, max_model_len + 1, dtype, device)
        self.block_size = pool.block_size
        self.device = device
        self.window = cfg.sliding_window
        self.decode_layout = decode_layout  # the attention kernel's: how decode rows are grouped, blocks zeroed
        self.max_model_len = max_model_len
        self.graphs: DecodeGraphs | None = None

    def close(self) -> None:
        """Nothing outside this process to release."""

    def _slots(self, table: list[int], start: int, end: int) -> list[int]:
        bs = self.block_size
        return [table[p // bs] * bs + p % bs for p in range(start, end)]

    def enable_decode_graphs(self, max_rows: int, capture: bool) -> None:
        """Serve decode-only steps of up to `max_rows` rows from static buffers, replayed as CUDA graphs when
        `capture` (engine/decode_graphs.py); `capture=False` runs that path eagerly (tests on CPU)."""
        self.graphs = DecodeGraphs(self._forward, device=self.device, max_rows=max_rows,
                                   max_blocks=-(-self.max_model_len // self.block_size), block_size=self.block_size,
                                   window=self.window, capture=capture)

    def prepare(self, batch: ScheduledBatch) -> StepInputs:
        """This kernel set's inputs from the step's backend-neutral layout (engine/step_layout.py): decode rows
        first (ascending KV length, so the kernel's groups are contiguous row ranges), then prefill segments. Index
        lists are built on the host and reach the device in one copy (or the static buffers of a decode graph)."""
        layout, sampling = step_layout(batch)
        bs = self.block_size
        rows: list[tuple[int, int, int]] = []  # (position, chunk index, token) of every decode row
        for c_i, c in enumerate(layout.chunks):
            if c.decode_rows:
                rows.extend((p, c_i, t) for p, t in zip(range(c.start, c.end), c.tokens))
        rows.sort(key=lambda r: r[0])

        chunks = layout.chunks
        ids = [tok for _, _, tok in rows]
        pos = [p for p, _, _ in rows]
        slots = [chunks[c_i].block_table[p // bs] * bs + p % bs for p, c_i, _ in rows]
        sample_rows: dict[int, list[int]] = {}  # chunk index -> its sampled rows, in position order
        for row, (p, c_i, _) in enumerate(rows):
            if p >= chunks[c_i].first_sampled:
                sample_rows.setdefault(c_i, []).append(row)
        kv_lens = [p + 1 for p in pos]  # each decode row attends to its own position and everything before
        groups = self.decode_layout.group_rows(kv_lens)

        segments: list[tuple[Chunk, int]] = []
        for c_i, c in enumerate(chunks):
            if c.decode_rows:
                continue
            row0 = len(ids)
            ids.extend(c.tokens)
            pos.extend(range(c.start, c.end))
            slots.extend(self._slots(c.block_table, c.start, c.end))
            segments.append((c, row0))
            if c.num_sampled:
                sample_rows[c_i] = [row0 + p - c.start for p in range(c.first_sampled, c.end)]

        counts = [c.num_sampled for c in chunks if c.num_sampled]
        logits_rows = [row for c_i in range(len(chunks)) for row in sample_rows.get(c_i, ())]
        tables = [chunks[c_i].block_table for _, c_i, _ in rows]
        if self.graphs is not None and not segments and logits_rows == list(range(len(rows))):
            if self.graphs.bucket(len(rows)) is not None and self.graphs.fits(tables):
                size = self.graphs.stage_rows(ids, pos, slots, kv_lens, tables)
                return StepInputs(input_ids=torch.empty(0), positions=torch.empty(0),
                                  meta=AttentionMetadata(slot_mapping=torch.empty(0)), logits_indices=torch.empty(0),
                                  sampling_seqs=sampling, sample_counts=counts, graph_size=size)
        return self._upload(HostStep(ids, pos, slots, kv_lens, logits_rows, groups, tables, segments, sampling, counts))

    def _upload(self, step: HostStep) -> StepInputs:
        """The eager step's tensors, from one host-to-device copy. Decode rows are padded to whole blocks per
        group: attention gathers block rows (bs * head_dim contiguous values each), faster than gathering token rows
        (docs/bench/design-choices.md); missing blocks point at the zeroed null block 0 and are masked by kv_lens."""
        bs = self.block_size
        ids, pos, slots, kv_lens, logits_rows = step.ids, step.pos, step.slots, step.kv_lens, step.logits_rows
        groups, tables, segments = step.groups, step.tables, step.segments
        lists: list[list[int]] = [ids, pos, slots, logits_rows]
        widths: list[int] = []
        for start, end in groups:
            nblk = -(-kv_lens[end - 1] // bs)
            widths.append(nblk)
            lists.append([b for t in tables[start:end] for b in (t[:nblk] + [0] * (nblk - len(t[:nblk])))])
            lists.append(kv_lens[start:end])
        for c, _ in segments:
            if c.start > 0:
                lists.append(self._slots(c.block_table, 0, c.end))
        tensors = iter(upload_int64(self.device, *lists))
        input_ids, positions, slot_mapping, logits_indices = (next(tensors) for _ in range(4))
        meta = AttentionMetadata(slot_mapping=slot_mapping)
        for (start, end), nblk in zip(groups, widths):
            table, lens = next(tensors).view(end - start, nblk), next(tensors)
            meta.decode_groups.append(DecodeGroup(start=start, end=end, block_table=table, block_size=bs,
                                                  kv_lens=lens, window=self.window, max_kv_len=kv_lens[end - 1],
                                                  min_kv_len=kv_lens[start]))
        for c, row0 in segments:
            kv_slots = next(tensors) if c.start > 0 else None
            meta.prefills.append(self._prefill_segment(row0, c.start, len(c.tokens), kv_slots))
        return StepInputs(input_ids=input_ids, positions=positions, meta=meta, logits_indices=logits_indices,
                          sampling_seqs=step.sampling, sample_counts=step.counts)

    def _prefill_segment(self, row0: int, start: int, n: int, kv_slots: torch.Tensor | None) -> PrefillSegment:
        """Plain causal attention (after any cached context) needs no mask; only a sliding window does."""
        end = start + n
        mask = None
        if self.window is not None and end > self.window:
            q_pos = torch.arange(start, end)[:, None]
            k_pos = torch.arange(end)[None, :]
            mask = ((k_pos <= q_pos) & (k_pos > q_pos - self.window)).to(self.device)
        return PrefillSegment(start=row0, length=n, context_len=start, kv_slots=kv_slots, mask=mask)

    def zero_blocks(self, block_ids: list[int]) -> None:
        """Zero whole blocks in every layer (done once per block, the first time it is handed out), for attention
        kernels that read never-written slots; a no-op for those that stop at each row's length."""
        if not self.decode_layout.zero_fresh_blocks:
            return
        ids = torch.tensor(block_ids, dtype=torch.long, device=self.device)
        for k_cache, v_cache in self.kv_caches:
            for cache in (k_cache, v_cache):
                cache.view(cache.shape[0], -1, self.block_size * cache.shape[2]).index_fill_(1, ids, 0)

    def execute(self, inputs: StepInputs) -> torch.Tensor:
        if inputs.graph_size is not None:
            assert self.graphs is not None
            return self.graphs.run(inputs.graph_size, sum(inputs.sample_counts))  # every row samples
        return self._forward(inputs.input_ids, inputs.positions, inputs.meta, inputs.logits_indices)

    def _forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata,
                 logits_indices: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids, self.cos[positions], self.sin[positions], self.kv_caches, meta, logits_indices)
