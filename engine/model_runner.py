"""Turns a scheduled batch into one packed forward pass: token ids, positions, cache slots, attention layout.

Index tensors are built once per step from Python lists (O(batch + new tokens)) and shared by all layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.kv_pool import allocate_kv_pool, default_kv_budget, kv_bytes_per_token
from engine.models.llama import LlamaModel
from engine.models.rotary import rotary_tables
from engine.scheduler import ScheduledBatch
from engine.sequence import Sequence
from kernels import AttentionMetadata, DecodeGroup, PrefillSegment

# Decode rows are grouped so padding wastes at most this share of a group's key positions (kernels that read
# padded blocks only; the others take all decode rows in one call).
_MAX_PAD_WASTE = 0.2
_MAX_GROUP = 64


# Chunks of at most this many query tokens (decodes, verify steps of speculative decoding, short prefill tails)
# run as decode rows: one row per query token, each reading its sequence's keys in place through the block table
# up to its own position. Longer chunks run as prefill segments (GEMM-shaped attention).
MAX_DECODE_QUERIES = 8


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


class ModelRunner:
    """Owns the model's step-time state: the KV pool (sized from a byte budget, or by default from how many tokens
    the caller would like to hold, within the device's caps) and the rotary tables."""

    def __init__(
        self,
        model: LlamaModel,
        *,
        dtype: torch.dtype,
        device: torch.device,
        block_size: int,
        kv_budget: int | None,
        kv_tokens_wanted: int,
        quantized_kv: bool,
        max_model_len: int,
        decode_reads_padding: bool = True,
    ) -> None:
        cfg = model.cfg
        self.model = model
        budget = kv_budget or default_kv_budget(device, kv_tokens_wanted * kv_bytes_per_token(cfg, dtype, quantized_kv))
        self.pool = allocate_kv_pool(cfg, dtype, device, block_size, budget, quantized_kv)
        self.kv_caches = self.pool.caches
        self.cos, self.sin = rotary_tables(cfg, max_model_len + 1, dtype, device)
        self.block_size = block_size
        self.device = device
        self.window = cfg.sliding_window
        # Kernels.decode_reads_padding: zero fresh blocks and group decode rows by length only when it holds.
        self.decode_reads_padding = decode_reads_padding

    def _slots(self, seq: Sequence, start: int, end: int) -> list[int]:
        bs, table = self.block_size, seq.block_table
        return [table[p // bs] * bs + p % bs for p in range(start, end)]

    def prepare(self, batch: ScheduledBatch) -> StepInputs:
        """Pack a batch: decode rows first (ascending KV length, so groups are contiguous row ranges), then prefill
        segments. A position samples only when the token there is the sequence's last verified token or a draft,
        i.e. never in the middle of a prompt, however the budget cut the chunk."""
        bs = self.block_size
        dev = self.device
        rows: list[tuple[int, Sequence, int]] = []  # (position, sequence, token) of every decode row
        prefills: list[tuple[Sequence, int]] = []
        for seq, n in zip(batch.seqs, batch.num_tokens):
            if n <= MAX_DECODE_QUERIES:
                start = seq.num_computed_tokens
                rows.extend((p, seq, t) for p, t in zip(range(start, start + n), seq.query_tokens(start, start + n)))
            else:
                prefills.append((seq, n))
        rows.sort(key=lambda r: r[0])

        ids: list[int] = []
        pos: list[int] = []
        slots: list[int] = []
        sample_rows: dict[int, list[int]] = {}  # id(seq) -> its sampled rows, in position order
        meta = AttentionMetadata(slot_mapping=torch.empty(0))

        group_start = 0
        group_lens: list[int] = []
        group_tables: list[list[int]] = []

        def close_group(end: int) -> None:
            if not group_lens:
                return
            meta.decode_groups.append(self._decode_group(group_start, end, group_lens, group_tables))

        for row, (p, seq, tok) in enumerate(rows):
            ids.append(tok)
            pos.append(p)
            slots.append(seq.block_table[p // bs] * bs + p % bs)
            if p >= seq.num_tokens - 1:
                sample_rows.setdefault(id(seq), []).append(row)
            kv_len = p + 1
            if group_lens and self.decode_reads_padding:
                padded = kv_len * (len(group_lens) + 1)  # rows ascend: this one is the group's longest
                waste = 1 - (sum(group_lens) + kv_len) / padded
                if waste > _MAX_PAD_WASTE or len(group_lens) >= _MAX_GROUP:
                    close_group(row)
                    group_start, group_lens, group_tables = row, [], []
            group_lens.append(kv_len)
            group_tables.append(seq.block_table)
        close_group(len(rows))

        for seq, n in prefills:
            start = seq.num_computed_tokens
            end = start + n
            row0 = len(ids)
            ids.extend(seq.query_tokens(start, end))
            pos.extend(range(start, end))
            slots.extend(self._slots(seq, start, end))
            meta.prefills.append(self._prefill_segment(seq, row0, start, n))
            first = max(start, seq.num_tokens - 1)
            if first < end:
                sample_rows[id(seq)] = list(range(row0 + first - start, row0 + n))

        sampling: list[Sequence] = []
        counts: list[int] = []
        logits_rows: list[int] = []
        for seq in batch.seqs:
            seq_rows = sample_rows.get(id(seq))
            if seq_rows:
                sampling.append(seq)
                counts.append(len(seq_rows))
                logits_rows.extend(seq_rows)

        positions = torch.tensor(pos, dtype=torch.long)
        meta.slot_mapping = torch.tensor(slots, dtype=torch.long, device=dev)
        return StepInputs(
            input_ids=torch.tensor(ids, dtype=torch.long, device=dev),
            positions=positions.to(dev),
            meta=meta,
            logits_indices=torch.tensor(logits_rows, dtype=torch.long, device=dev),
            sampling_seqs=sampling,
            sample_counts=counts,
        )

    def _decode_group(self, start: int, end: int, lens: list[int], tables: list[list[int]]) -> DecodeGroup:
        """Rows padded to whole blocks: attention gathers block rows (bs * head_dim contiguous values each), which
        measured 2-3x faster than gathering token rows. Positions past a row's length are masked (DecodeGroup
        derives the mask from kv_lens when a backend asks for it); missing blocks point at the zeroed null block 0."""
        bs = self.block_size
        longest = max(lens)
        nblk = -(-longest // bs)
        padded_tables = [t[:nblk] + [0] * (nblk - len(t[:nblk])) for t in tables]
        table = torch.tensor(padded_tables, dtype=torch.long)
        return DecodeGroup(
            start=start,
            end=end,
            block_table=table.to(self.device),
            block_size=bs,
            kv_lens=torch.tensor(lens, dtype=torch.long).to(self.device),
            window=self.window,
        )

    def _prefill_segment(self, seq: Sequence, row0: int, start: int, n: int) -> PrefillSegment:
        """Plain causal attention (after any cached context) needs no mask; only a sliding window does."""
        end = start + n
        kv_slots = None
        if start > 0:
            kv_slots = torch.tensor(self._slots(seq, 0, end), dtype=torch.long, device=self.device)
        mask = None
        if self.window is not None and end > self.window:
            q_pos = torch.arange(start, end)[:, None]
            k_pos = torch.arange(end)[None, :]
            mask = ((k_pos <= q_pos) & (k_pos > q_pos - self.window)).to(self.device)
        return PrefillSegment(start=row0, length=n, context_len=start, kv_slots=kv_slots, mask=mask)

    def zero_blocks(self, block_ids: list[int]) -> None:
        """Zero whole blocks in every layer (done once per block, the first time it is handed out), for attention
        kernels that read never-written slots; a no-op for those that stop at each row's length."""
        if not self.decode_reads_padding:
            return
        ids = torch.tensor(block_ids, dtype=torch.long, device=self.device)
        for k_cache, v_cache in self.kv_caches:
            for cache in (k_cache, v_cache):
                cache.view(cache.shape[0], -1, self.block_size * cache.shape[2]).index_fill_(1, ids, 0)

    def execute(self, inputs: StepInputs) -> torch.Tensor:
        cos = self.cos[inputs.positions]
        sin = self.sin[inputs.positions]
        return self.model(inputs.input_ids, cos, sin, self.kv_caches, inputs.meta, inputs.logits_indices)
