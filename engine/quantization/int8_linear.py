"""`Int8Linear`: the drop-in replacement for `engine.models.layers.Linear` with int8 weights."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from engine.models.layers import Linear
from kernels.reference.int8_gemm import quantize_weight

# (x, int8 weight [N, K], float32 scale [N], bias | None) -> x.dtype; chosen by kernels.dispatch. A matmul whose
# `pack_weight` attribute is not None (the CPU VNNI/AVX2 kernels) also takes `pack_weight(qweight)` with `packed=True`.
Int8Matmul = Callable[..., torch.Tensor]


class Int8Linear(nn.Module):
    """y = x @ (qweight * scale[:, None]).T + bias, with int8 weights and one float32 scale per output channel.

    Buffers, not parameters: nothing here is trainable, and `state_dict()` still carries them. The weight is held
    in one form: `int8_weight` [N, K], or `packed_weight` when the matmul packs weights (its layout is the
    kernel's); `qweight` gives [N, K] either way.
    """

    def __init__(
        self, qweight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None, matmul: Int8Matmul
    ) -> None:
        super().__init__()
        if qweight.dtype != torch.int8 or qweight.dim() != 2:
            raise ValueError(f"qweight must be a 2-D int8 tensor, got {qweight.dtype} {tuple(qweight.shape)}")
        if scale.shape != (qweight.shape[0],):
            raise ValueError(f"scale must have shape ({qweight.shape[0]},), got {tuple(scale.shape)}")
        pack = getattr(matmul, "pack_weight", None)
        self.shape = tuple(qweight.shape)
        self.register_buffer("int8_weight", qweight.contiguous() if pack is None else None)
        self.register_buffer("packed_weight", pack(qweight.contiguous()) if pack is not None else None)
        self.register_buffer("scale", scale.to(device=qweight.device, dtype=torch.float32).contiguous())
        self.register_buffer("bias", bias)
        self._matmul = matmul

    @classmethod
    def from_linear(cls, linear: Linear, matmul: Int8Matmul) -> "Int8Linear":
        """Quantize a float `Linear` (pre-quantized checkpoints go through `attach_int8_weights` instead)."""
        q, s = quantize_weight(linear.weight)
        bias = linear.bias.detach() if linear.bias is not None else None
        return cls(q.to(linear.weight.device), s, bias, matmul)

    @property
    def qweight(self) -> torch.Tensor:
        """The int8 weight [N, K] (unpacked on each access when held packed: for inspection, not the hot path)."""
        if self.int8_weight is not None:
            return self.int8_weight
        return self._matmul.unpack_weight(self.packed_weight, *self.shape)

    @property
    def out_features(self) -> int:
        return self.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed_weight is not None:
            return self._matmul(x, self.packed_weight, self.scale, self.bias, packed=True)
        return self._matmul(x, self.int8_weight, self.scale, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.shape[1]}, out_features={self.shape[0]}, int8 per-channel"
