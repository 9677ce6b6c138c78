"""Compute primitives the model uses, behind one dispatch point.

Model code calls `get_kernels(device)` once and then only the returned functions, so a Triton or fused
implementation can replace a torch reference without touching the model.
"""

from kernels.attention_metadata import AttentionMetadata, DecodeGroup, PrefillSegment
from kernels.dispatch import Kernels, get_kernels
from kernels.reference.kv_cache import kv_row_width

__all__ = ["AttentionMetadata", "DecodeGroup", "PrefillSegment", "Kernels", "get_kernels", "kv_row_width"]
