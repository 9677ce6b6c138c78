"""How one packed engine step is laid out for attention; built once per step, shared by every layer."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class DecodeGroup:
    """Decode rows [start, end) of the flat batch whose KV lengths are close, padded to one length."""

    start: int
    end: int
    block_table: torch.Tensor  # [G, nblk] KV block ids of each row, padded with the zeroed null block 0
    block_size: int
    kv_lens: torch.Tensor  # [G] int64 keys per row, the new token included
    window: int | None = None  # sliding window: keys kept per row
    # kv_lens' extremes as host ints, known to whoever built the rows: kernels size their grids and masks from
    # these instead of reading kv_lens back (a device-to-host sync per layer on GPUs; under CUDA graph capture,
    # max_kv_len is the table's whole width so one graph serves every length).
    max_kv_len: int | None = None
    min_kv_len: int | None = None
    _mask: torch.Tensor | None = field(default=None, repr=False, compare=False)
    _mask_built: bool = field(default=False, repr=False, compare=False)

    def key_mask(self) -> torch.Tensor | None:
        """[G, nblk * block_size] bool, True where a padded key position is real (and inside the window); None
        when nothing needs masking. For backends that gather whole blocks; kernels that read the pool through
        kv_lens never build it. Built on first use and shared by every layer of the step."""
        if not self._mask_built:
            lens = self.kv_lens[:, None]
            key_pos = torch.arange(self.block_table.shape[1] * self.block_size, device=lens.device)[None, :]
            longest = self.max_kv_len if self.max_kv_len is not None else int(lens.max())
            shortest = self.min_kv_len if self.min_kv_len is not None else int(lens.min())
            if self.window is not None and longest > self.window:
                self._mask = (key_pos < lens) & (key_pos > lens - 1 - self.window)
            elif shortest != key_pos.shape[1]:
                self._mask = key_pos < lens
            self._mask_built = True
        return self._mask


@dataclass
class PrefillSegment:
    """Query rows [start, start + length) of one sequence, continuing after `context_len` cached tokens."""

    start: int
    length: int
    context_len: int
    kv_slots: torch.Tensor | None  # [context_len + length] slots, None when there is no cached context
    mask: torch.Tensor | None  # [length, context_len + length] bool, None when plain causal suffices
    _causal: torch.Tensor | None = field(default=None, repr=False, compare=False)

    def causal_mask(self, device: torch.device) -> torch.Tensor:
        """[length, context_len + length] bool, True where a query may attend: for backends that need the
        causal-after-context mask spelled out. Built on first use and shared by every layer of the step."""
        if self._causal is None:
            q_pos = torch.arange(self.context_len, self.context_len + self.length, device=device)[:, None]
            self._causal = torch.arange(self.context_len + self.length, device=device)[None, :] <= q_pos
        return self._causal


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [T] cache slot where each new token's K/V is written
    decode_groups: list[DecodeGroup] = field(default_factory=list)
    prefills: list[PrefillSegment] = field(default_factory=list)
