"""The context-parallel attention backend's metadata: what each rank derives from the step's layout.

Rank 0 broadcasts the step's backend-neutral `StepLayout` (engine/step_layout.py): small and the same for every
rank, per scheduled sequence its block table (global block ids), the first position computed, the query tokens
and how many positions sample. Each rank then derives its own share (`RankLayout`): which rows it computes, where
their K/V go in its pool, and the key sets attention needs. Nothing per token is broadcast.

Two kinds of rows:
- replicated rows (chunks that run as decode rows, at most MAX_DECODE_QUERIES tokens): every rank computes them;
  each attends to the keys it holds and the partial outputs are merged by LSE, so every rank ends with the same hidden state.
  Only the owner of a row's block stores its K/V.
- sharded rows (longer prefill chunks): a row is computed only by the rank that owns its block; attention runs as
  ring attention over the chunk's sequence (K/V of every rank travel the ring).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.step_layout import StepLayout

# Key position given to padding in a replicated row's key set: never <= a query position.
PAD_POSITION = 1 << 62


@dataclass
class Segment:
    """One sharded chunk as one rank sees it: its own query rows and every rank's keys up to the chunk's end."""

    rows: slice  # this rank's query rows in its packed batch
    q_pos: torch.Tensor  # [m] positions of those rows
    k_pos: list[torch.Tensor]  # per rank: positions of the keys it holds for this sequence (< chunk end)
    k_slots: torch.Tensor  # this rank's local slots of its keys, in k_pos[rank] order


@dataclass
class RankLayout:
    input_ids: torch.Tensor
    positions: torch.Tensor
    slot_mapping: torch.Tensor  # local slot of each row's K/V, -1 where another rank stores it
    num_replicated: int  # rows [0, num_replicated) are replicated, the rest sharded
    rep_q_pos: torch.Tensor  # [R]
    rep_key_slots: torch.Tensor  # [R, L] local slots of each replicated row's keys here (padding: slot 0)
    rep_key_pos: torch.Tensor  # [R, L] their positions (padding: PAD_POSITION)
    segments: list[Segment] = field(default_factory=list)
    sample_rows: list[tuple[int, int]] = field(default_factory=list)  # per sampling entry: (owner rank, row there)


def _owned_keys(table: list[int], end: int, rank: int, stride: int, bs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions, local slots) of the keys at positions < end that `rank` holds, in position order."""
    idx = [i for i in range(-(-end // bs)) if table[i] // stride == rank]
    if not idx:
        empty = torch.empty(0, dtype=torch.long)
        return empty, empty
    logical = torch.tensor(idx, dtype=torch.long)
    local = torch.tensor([table[i] % stride for i in idx], dtype=torch.long)
    offs = torch.arange(bs, dtype=torch.long)
    pos = (logical[:, None] * bs + offs).reshape(-1)
    slots = (local[:, None] * bs + offs).reshape(-1)
    keep = pos < end
    return pos[keep], slots[keep]


def build_layout(plan: StepLayout, rank: int, num_ranks: int, stride: int, block_size: int,
                 device: torch.device) -> RankLayout:
    """This rank's share of a step: O(blocks) Python per sequence, the per-token work in tensor ops."""
    bs = block_size
    ids: list[int] = []
    pos: list[int] = []
    slots: list[int] = []
    rep_q: list[int] = []
    rep_keys: list[tuple[torch.Tensor, torch.Tensor, int]] = []  # (positions, slots, rows) per replicated entry
    row_of: dict[int, tuple[int, int]] = {}  # entry index -> (owner rank, row) of its sampling row
    for e_i, e in enumerate(plan.chunks):
        if not e.decode_rows:
            continue
        end = e.start + len(e.tokens)
        for j, tok in enumerate(e.tokens):
            p = e.start + j
            bid = e.block_table[p // bs]
            ids.append(tok)
            pos.append(p)
            slots.append((bid % stride) * bs + p % bs if bid // stride == rank else -1)
            rep_q.append(p)
        kp, ks = _owned_keys(e.block_table, end, rank, stride, bs)
        rep_keys.append((kp, ks, len(e.tokens)))
        if e.num_sampled:
            row_of[e_i] = (0, len(ids) - 1)  # rank 0 computes replicated rows too
    num_rep = len(ids)
    longest = max((len(k[0]) for k in rep_keys), default=0)
    key_slots = torch.zeros((num_rep, longest), dtype=torch.long)
    key_pos = torch.full((num_rep, longest), PAD_POSITION, dtype=torch.long)
    r = 0
    for kp, ks, n in rep_keys:
        key_slots[r : r + n, : len(ks)] = ks
        key_pos[r : r + n, : len(kp)] = kp
        r += n

    segments: list[Segment] = []
    rows_so_far = [num_rep] * num_ranks  # rows each rank has packed so far (all ranks pack the same way)
    for e_i, e in enumerate(plan.chunks):
        if e.decode_rows:
            continue
        end = e.start + len(e.tokens)
        row0 = len(ids)
        mine: list[int] = []
        for j, tok in enumerate(e.tokens):
            p = e.start + j
            bid = e.block_table[p // bs]
            owner = bid // stride
            rows_so_far[owner] += 1
            if owner == rank:
                ids.append(tok)
                pos.append(p)
                slots.append((bid % stride) * bs + p % bs)
                mine.append(p)
        if e.num_sampled:
            owner = e.block_table[(end - 1) // bs] // stride
            row_of[e_i] = (owner, rows_so_far[owner] - 1)  # positions ascend: the owner's last row of the chunk
        k_pos: list[torch.Tensor] = []
        k_slots = torch.empty(0, dtype=torch.long)
        for rr in range(num_ranks):
            kp, ks = _owned_keys(e.block_table, end, rr, stride, bs)
            k_pos.append(kp.to(device))
            if rr == rank:
                k_slots = ks
        segments.append(Segment(slice(row0, len(ids)), torch.tensor(mine, dtype=torch.long, device=device), k_pos,
                                k_slots.to(device)))

    return RankLayout(
        input_ids=torch.tensor(ids, dtype=torch.long, device=device),
        positions=torch.tensor(pos, dtype=torch.long, device=device),
        slot_mapping=torch.tensor(slots, dtype=torch.long, device=device),
        num_replicated=num_rep,
        rep_q_pos=torch.tensor(rep_q, dtype=torch.long, device=device),
        rep_key_slots=key_slots.to(device),
        rep_key_pos=key_pos.to(device),
        segments=segments,
        sample_rows=[row_of[e_i] for e_i in sorted(row_of)],
    )

