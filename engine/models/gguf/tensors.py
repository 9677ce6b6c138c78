"""GGUF tensors -> Hugging Face-named torch tensors the engine's loader takes.

Dequantization is the `gguf` package's (`gguf.quants.dequantize`, numpy, one tensor at a time, so peak memory is
one float32 tensor beyond the model). llama.cpp's converter permutes the rows of Llama's Q and K projections to
its own rotary layout; we undo that here (Qwen2 files are not permuted).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import torch

from engine.errors import ModelLoadError
from engine.models.config import ModelConfig
from engine.models.gguf.reader import GGUFFile, GGUFTensor

# The types tests cover (tests/test_gguf.py); others the `gguf` package knows are refused rather than trusted.
SUPPORTED_QUANT_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K")

_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_LAYER = re.compile(r"^blk\.(\d+)\.(.+)$")


def hf_name(name: str) -> str | None:
    if name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[name]
    m = _LAYER.match(name)
    if m and m.group(2) in _LAYER_NAMES:
        return f"model.layers.{m.group(1)}.{_LAYER_NAMES[m.group(2)]}"
    return None


def unpermute_rotary_rows(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Inverse of llama.cpp's `permute` (convert_hf_to_gguf.py): per head, its rows were reordered from
    [first half, second half] to interleaved pairs; put them back in halves."""
    rows = w.shape[0]
    half = rows // n_heads // 2
    return w.reshape(n_heads, half, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def _dequantize(t: GGUFTensor) -> np.ndarray:
    from gguf import GGMLQuantizationType, quants  # noqa: PLC0415

    kind = t.tensor_type
    shape = tuple(reversed(t.shape))  # GGUF lists ne0 (columns) first
    if kind in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        arr = np.array(t.data)  # a copy: the file is mapped read-only
    else:
        arr = quants.dequantize(t.data, kind)
    return arr.reshape(shape)


def gguf_tensors(f: GGUFFile, cfg: ModelConfig,
                 int8: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]] | None = None,
                 is_projection: Callable[[str], bool] | None = None) -> dict[str, torch.Tensor]:
    """All weights, renamed to Hugging Face names. With `int8` (a per-channel quantizer) the decoder projections are
    quantized as each is dequantized, so the float copy of the whole model never exists (`<name>_scale` holds the
    scales, the layout of a `pipeline quantize` checkpoint)."""
    out: dict[str, torch.Tensor] = {}
    permute = cfg.family == "llama"
    for name, t in f.tensors.items():
        kind = t.tensor_type.name
        target = hf_name(name)
        if target is None:
            raise ModelLoadError(f"{f.path}: unexpected tensor {name!r} for GGUF architecture {f.architecture!r}")
        if kind not in SUPPORTED_QUANT_TYPES:
            raise ModelLoadError(f"{f.path}: tensor {name!r} has GGML type {kind}, not supported; "
                                 f"supported: {', '.join(SUPPORTED_QUANT_TYPES)}")
        w = torch.from_numpy(np.ascontiguousarray(_dequantize(t)))  # dequantize returns a fresh array
        if permute and ".attn_q." in name:
            w = unpermute_rotary_rows(w, cfg.num_heads)
        elif permute and ".attn_k." in name:
            w = unpermute_rotary_rows(w, cfg.num_kv_heads)
        if int8 is not None and is_projection is not None and is_projection(target):
            q, scale = int8(w.float())
            out[target], out[target + "_scale"] = q, scale
        else:
            out[target] = w
    f.release_pages()  # every tensor is built: the file's pages need not stay resident
    return out
