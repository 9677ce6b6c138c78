"""Swap the decoder's projection layers and the LM head for `Int8Linear`, by quantizing them or from stored int8
weights.

The LM head is quantized on load (pre-quantized checkpoints keep it in float): at decode's few rows its GEMM is
the largest single matmul of a step, well below the bf16 peak, and the int8 one is faster
(docs/bench/design-choices.md). The embedding table stays in the model dtype for lookups, so with tied
embeddings the int8 head is an extra copy (half the bytes of a bf16 table). Its accuracy cost is measured with
`pipeline eval` (README).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from engine.models.layers import Linear
from engine.quantization.int8_linear import Int8Linear, Int8Matmul
from kernels import get_kernels

SUPPORTED_METHODS = ("int8",)
# DecoderLayer attribute -> key of the loader's fused per-layer weight dict.
PROJECTIONS = {"qkv_proj": "qkv", "o_proj": "o", "gate_up_proj": "gate_up", "down_proj": "down"}


def _int8_matmul(model: nn.Module, device: torch.device) -> Int8Matmul:
    kernels = getattr(model, "k", None)
    fn = getattr(kernels, "int8_linear", None)
    return fn if fn is not None else get_kernels(device).int8_linear


def _decoder_layers(model: nn.Module) -> Sequence[nn.Module]:
    layers = getattr(model, "layers", None)
    if layers is None:
        raise TypeError(f"{type(model).__name__} has no `layers`; expected engine.models.llama.LlamaModel")
    return layers


def quantize_model(model: nn.Module, method: str) -> nn.Module:
    """Replace every float `Linear` projection in the decoder layers, and the LM head, with an `Int8Linear`, in
    place.

    Layers that are already `Int8Linear` (pre-quantized checkpoints) are left as they are.
    """
    if method not in SUPPORTED_METHODS:
        raise ValueError(f"unknown quantization {method!r}; supported: {', '.join(SUPPORTED_METHODS)}")
    owners = [(layer, attr) for layer in _decoder_layers(model) for attr in PROJECTIONS] + [(model, "lm_head")]
    matmul: Int8Matmul | None = None
    for owner, attr in owners:
        lin = getattr(owner, attr)
        if isinstance(lin, Int8Linear):
            continue
        if not isinstance(lin, Linear):
            raise TypeError(f"cannot quantize {attr} of type {type(lin).__name__}")
        if lin.weight.dtype == torch.int8:
            raise ValueError(f"{attr} already holds int8 weights but no scales; load it with its scales instead")
        matmul = matmul or _int8_matmul(model, lin.weight.device)
        setattr(owner, attr, Int8Linear.from_linear(lin, matmul))
    return model


def attach_int8_weights(model: nn.Module, layer_weights: Sequence[dict[str, torch.Tensor]]) -> nn.Module:
    """Turn projections built from a pre-quantized checkpoint (int8 weights; scales in the loader's
    per-layer dicts under "<key>_scale") into `Int8Linear`, without re-quantizing anything."""
    layers = _decoder_layers(model)
    if len(layers) != len(layer_weights):
        raise ValueError(f"model has {len(layers)} layers but {len(layer_weights)} weight dicts were given")
    matmul: Int8Matmul | None = None
    for layer, lw in zip(layers, layer_weights):
        for attr, key in PROJECTIONS.items():
            lin = getattr(layer, attr)
            if not isinstance(lin, Linear) or lin.weight.dtype != torch.int8:
                raise ValueError(f"{attr} is not an int8 Linear; the checkpoint mixes float and int8 projections")
            if f"{key}_scale" not in lw:
                raise ValueError(f"missing scales for {attr} ({key}_scale)")
            matmul = matmul or _int8_matmul(model, lin.weight.device)
            bias = lin.bias.detach() if lin.bias is not None else None
            setattr(layer, attr, Int8Linear(lin.weight.detach(), lw[f"{key}_scale"], bias, matmul))
    return model


def linear_weight_bytes(model: nn.Module) -> dict[str, int]:
    """Bytes of the decoder projections (int8 weights + scales + bias, or float weights) and of the whole model.

    Tensors are counted once per storage, so a tied embedding / LM head is not counted twice.
    """

    def nbytes(tensors: Sequence[torch.Tensor]) -> int:
        unique = {t.data_ptr(): t.numel() * t.element_size() for t in tensors if t is not None}
        return sum(unique.values())

    proj = [t for layer in _decoder_layers(model) for attr in PROJECTIONS
            for t in (*getattr(layer, attr).parameters(), *getattr(layer, attr).buffers())]
    total = nbytes([*model.parameters(), *model.buffers()])
    projections = nbytes(proj)
    return {"projections": projections, "other": total - projections, "total": total}
