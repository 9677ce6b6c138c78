"""Where a CPU float32 model keeps its linear weights: row-major [out, in] as checkpoints store them, or in
input-major storage (the same [out, in] tensor as a transposed view of a contiguous [in, out] buffer).

`F.linear(x, W)` hands the BLAS `x @ W.T`; with W in input-major storage that is a plain (non-transposed) GEMM.
Which of the two the BLAS runs faster at decode's few rows depends on the library and the CPU (on an AVX-512
Xeon, MKL's transposed-operand path ran 2-4x slower below 64 rows, the same above), so the choice is measured
once per process on a layer-sized GEMM instead of assumed. Values are the same tensor either way; only the
BLAS kernel (and so the last bits of a sum) can differ, as they already do between batch sizes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from engine.models.layers import Linear

_PROBE_ROWS = 16  # a decode step's rows where the layouts differ most
_PROBE_SHAPE = (1536, 576)  # a small model's MLP projection: the GEMMs decode runs most
_FASTER_BY = 1.2  # below this the stored layout stays: a timing on a shared box is noisy
_REPS = 15


def _input_major(t: torch.Tensor) -> torch.Tensor:
    return t.t().contiguous().t()


def _seconds(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


@functools.lru_cache(maxsize=1)
def input_major_is_faster() -> bool:
    """Whether this process's BLAS runs a float32 `F.linear` at decode's row counts faster with the weight in
    input-major storage (measured once, a few milliseconds). The two layouts are timed in turn and each keeps its
    best, so a neighbour's load on a shared CPU falls on both."""
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(*_PROBE_SHAPE, generator=gen)
    w_in = _input_major(w)
    x = torch.randn(_PROBE_ROWS, _PROBE_SHAPE[1], generator=gen)
    row_major = input_major = float("inf")
    with torch.inference_mode():
        for _ in range(3):  # warm up both paths (thread pool, kernel selection)
            F.linear(x, w), F.linear(x, w_in)
        for _ in range(_REPS):
            row_major = min(row_major, _seconds(lambda: F.linear(x, w)))
            input_major = min(input_major, _seconds(lambda: F.linear(x, w_in)))
    return input_major * _FASTER_BY < row_major


def store_input_major(model: nn.Module) -> int:
    """Move every float32 `Linear` weight of `model` (and a tied embedding with its LM head) to input-major
    storage, one tensor at a time so the peak holds one extra copy; returns how many tensors moved."""
    moved: dict[int, torch.Tensor] = {}  # storage of a weight already moved -> its new view (tied weights)
    n = 0
    for module in model.modules():
        if not isinstance(module, Linear) or module.weight.dtype != torch.float32 or module.weight.dim() != 2:
            continue
        key = module.weight.data_ptr()
        if key not in moved:
            moved[key] = _input_major(module.weight.data)
            n += 1
        module.weight = nn.Parameter(moved[key], requires_grad=False)
    embed = getattr(model, "embed", None)
    if isinstance(embed, nn.Parameter) and embed.data_ptr() in moved:  # tied: the LM head's tensor is the table
        model.embed = nn.Parameter(moved[embed.data_ptr()], requires_grad=False)
    return n
