"""INT8 weights for the decoder projections: quantize on load, or load a pre-quantized checkpoint.

Weights: int8, symmetric, one float32 scale per output channel. The matmul is chosen by `kernels.dispatch`
(per-token W8A8 on CPU: our packed-weight AVX512-VNNI or AVX2 kernel where it builds, else `torch._int_mm`; the
Triton W8A8 GEMM with the same numbers on CUDA).
"""

from engine.quantization.checkpoint import QUANT_METHOD, checkpoint_quantization, quantize_checkpoint
from engine.quantization.int8_linear import Int8Linear
from engine.quantization.model import SUPPORTED_METHODS, attach_int8_weights, linear_weight_bytes, quantize_model

__all__ = [
    "QUANT_METHOD",
    "SUPPORTED_METHODS",
    "Int8Linear",
    "attach_int8_weights",
    "checkpoint_quantization",
    "linear_weight_bytes",
    "quantize_checkpoint",
    "quantize_model",
]
