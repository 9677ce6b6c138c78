"""CUDA graphs for decode steps: one captured forward per batch-size bucket, replayed with new inputs.

A decode step of a small model is hundreds of short kernels; launched one by one from Python, the launches take
longer than the work. A captured graph replays them all with one launch. A graph fixes its tensors' addresses and
shapes, so each bucket reads its inputs from static buffers: the step's rows are copied in (one host-to-device
copy per field), the rows up to the bucket size are padding (token 0 at position 0, writing its K/V into slot 0 of
the null block that no sequence owns, attending to that one key), and the first rows of the static logits are the
step's. Attention is sized for the longest possible row (the block table's full width): the split-K decode kernel
runs empty splits for shorter rows, which weigh nothing in its merge.

Only steps of decode rows that all sample (plain decode and speculative verify rows; no prefill chunk) qualify;
the runner runs every other step eagerly. Graphs are captured lazily, the first time a bucket is needed, into one
shared memory pool (buckets are replayed one at a time, never concurrently).

`capture=False` runs the same static-buffer path without capturing: on CPU, where tests check that padding and
staging change no token.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from kernels import AttentionMetadata, DecodeGroup

# Padding rows write their K/V here: slot 0 of block 0, the null block the block manager never hands out.
PAD_SLOT = 0

Forward = Callable[[torch.Tensor, torch.Tensor, AttentionMetadata, torch.Tensor], torch.Tensor]


def bucket_sizes(max_rows: int) -> list[int]:
    """1, 2, 4, then every multiple of 8 up to max_rows (and max_rows itself): at most 7 padding rows per step
    beyond 8 rows, and one graph per bucket."""
    sizes = [s for s in (1, 2, 4) if s < max_rows] + list(range(8, max_rows, 8))
    return sorted(set(sizes + [max_rows]))


class DecodeGraphs:
    """Static input buffers and one graph per bucket for the decode-only steps of one model runner."""

    _FIELDS = ("ids", "pos", "slots", "lens")

    def __init__(self, forward: Forward, *, device: torch.device, max_rows: int, max_blocks: int, block_size: int,
                 window: int | None, capture: bool) -> None:
        if capture and device.type != "cuda":
            raise ValueError("CUDA graphs need a CUDA device")
        self.forward = forward
        self.device = device
        self.sizes = bucket_sizes(max_rows)
        self.max_rows = max_rows
        self.block_size = block_size
        self.window = window
        self.capture = capture
        self.max_kv_len = max_blocks * block_size
        # Device buffers the graphs read, and host staging they are copied from (pinned on CUDA, so the copies
        # run asynchronously; the sampler's read-back each step orders the next step's writes after them).
        self.buf = {f: torch.zeros(max_rows, dtype=torch.int64, device=device) for f in self._FIELDS}
        self.buf["table"] = torch.zeros(max_rows, max_blocks, dtype=torch.int64, device=device)
        pin = device.type == "cuda"
        self.stage = {f: torch.zeros(t.shape, dtype=torch.int64, pin_memory=pin) for f, t in self.buf.items()}
        self._np = {f: t.numpy() for f, t in self.stage.items()}
        self.logits_rows = torch.arange(max_rows, dtype=torch.int64, device=device)
        self._graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self._outputs: dict[int, torch.Tensor] = {}
        self._pool = torch.cuda.graph_pool_handle() if capture else None
        self.replays = 0  # steps served from the static buffers (stats, tests)

    def bucket(self, rows: int) -> int | None:
        """The smallest bucket holding `rows` decode rows, or None when the step is too big for graphs."""
        if rows == 0 or rows > self.max_rows:
            return None
        return next(s for s in self.sizes if s >= rows)

    def fits(self, tables: Sequence[Sequence[int]]) -> bool:
        return all(len(t) <= self.buf["table"].shape[1] for t in tables)

    def stage_rows(self, ids: list[int], pos: list[int], slots: list[int], lens: list[int],
                   tables: Sequence[Sequence[int]]) -> int:
        """Write a step's rows and the padding up to its bucket into the static buffers; returns the bucket."""
        n = len(ids)
        size = self.bucket(n)
        assert size is not None
        a = self._np
        a["ids"][:n], a["pos"][:n], a["slots"][:n], a["lens"][:n] = ids, pos, slots, lens
        a["ids"][n:size] = 0
        a["pos"][n:size] = 0
        a["slots"][n:size] = PAD_SLOT
        a["lens"][n:size] = 1
        table = a["table"]
        for r, t in enumerate(tables):
            table[r, : len(t)] = t
        table[n:size, 0] = PAD_SLOT // self.block_size  # the null block
        for f, dst in self.buf.items():
            dst[:size].copy_(self.stage[f][:size], non_blocking=True)
        return size

    def run(self, size: int, rows: int) -> torch.Tensor:
        """Logits of the staged step's `rows` rows (a view into the bucket's static output)."""
        self.replays += 1
        if not self.capture:
            return self._forward(size)[:rows]
        graph = self._graphs.get(size)
        if graph is None:
            graph = self._capture(size)
        graph.replay()
        return self._outputs[size][:rows]

    def _forward(self, size: int) -> torch.Tensor:
        b = self.buf
        group = DecodeGroup(start=0, end=size, block_table=b["table"][:size], block_size=self.block_size,
                            kv_lens=b["lens"][:size], window=self.window, max_kv_len=self.max_kv_len)
        meta = AttentionMetadata(slot_mapping=b["slots"][:size], decode_groups=[group])
        return self.forward(b["ids"][:size], b["pos"][:size], meta, self.logits_rows[:size])

    def _capture(self, size: int) -> torch.cuda.CUDAGraph:
        """Warm up on a side stream (Triton compiles, the allocator settles), then capture. The warm-up computes
        the staged step itself, so the K/V it writes are the ones the replay writes again."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self._forward(size)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            self._outputs[size] = self._forward(size)
        self._graphs[size] = graph
        return graph

    @property
    def captured(self) -> list[int]:
        return sorted(self._graphs)
