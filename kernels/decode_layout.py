"""How a decode-attention kernel wants a step's decode rows laid out: which rows share one call, and whether
never-written KV slots must be zeroed before it reads them.

This is a property of the kernel, so each kernel set (`kernels.dispatch.Kernels.decode_layout`) carries its own;
the model runner only asks it. The torch reference gathers each row's blocks whole, padded to the longest row of
its call, and masks the tail: never-written slots must then hold finite values (zeroed once, when a block is first
handed out), and rows of similar length share a call so the padding stays small. Kernels that stop at each row's
own length (the native CPU, Triton and context-parallel ones) take all decode rows in one call and need no zeroing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DecodeLayout:
    reads_padding: bool
    max_pad_waste: float = 0.2  # share of a call's key positions padding may take (padded reads only)
    max_group: int = 64  # rows per call (padded reads only)

    @property
    def zero_fresh_blocks(self) -> bool:
        return self.reads_padding

    def group_rows(self, kv_lens: list[int]) -> list[tuple[int, int]]:
        """Row ranges [start, end) of the decode calls, for rows sorted by ascending KV length."""
        if not kv_lens:
            return []
        if not self.reads_padding:
            return [(0, len(kv_lens))]
        groups: list[tuple[int, int]] = []
        start, total = 0, 0
        for row, kv_len in enumerate(kv_lens):
            n = row - start
            if n:
                padded = kv_len * (n + 1)  # rows ascend: this one is the group's longest
                if 1 - (total + kv_len) / padded > self.max_pad_waste or n >= self.max_group:
                    groups.append((start, row))
                    start, total = row, 0
            total += kv_len
        groups.append((start, len(kv_lens)))
        return groups


PADDED_BLOCK_READS = DecodeLayout(reads_padding=True)
EXACT_LENGTH_READS = DecodeLayout(reads_padding=False)
