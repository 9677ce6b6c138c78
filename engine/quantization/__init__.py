"""INT8 weights for the decoder projections: quantize a model on load, or write a pre-quantized checkpoint (which
`engine.models.weights` reads).

Weights: int8, symmetric, one float32 scale per output channel. The matmul is chosen by `kernels.dispatch`
(per-token W8A8 on CPU: our packed-weight AVX512-VNNI or AVX2 kernel where it builds, else `torch._int_mm`; the
Triton W8A8 GEMM with the same numbers on CUDA).
"""

from engine.quantization.checkpoint import quantize_checkpoint
from engine.quantization.int8_linear import Int8Linear
from engine.quantization.model import (
    SUPPORTED_METHODS,
    attach_int8_weights,
    linear_weight_bytes,
    quantize_model,
)

__all__ = [
    "SUPPORTED_METHODS",
    "Int8Linear",
    "attach_int8_weights",
    "linear_weight_bytes",
    "quantize_checkpoint",
    "quantize_model",
]
