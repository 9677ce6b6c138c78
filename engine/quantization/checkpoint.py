"""Pre-quantized checkpoints: `quantize_checkpoint` writes one (`engine.models.weights` reads and recognises one).

Layout: the same tensor names as the source Hugging Face checkpoint; each decoder projection weight
(q/k/v/o/gate/up/down) is stored as int8 [out, in] next to a float32 `<name>_scale` [out]. Everything else
(embeddings, norms, LM head, biases) keeps its source dtype. config.json gains a `quantization_config`
entry, which is how the engine knows to load the int8 tensors as they are instead of quantizing again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from safetensors.torch import save_file

from engine.errors import ModelLoadError
from engine.models.config import load_model_config
from engine.models.weights import (
    QUANT_METHOD,
    SCALE_SUFFIX,
    is_quantized_weight_name,
    read_config_json,
    read_tensors,
)
from kernels.reference.int8_gemm import quantize_weight

QUANTIZATION_CONFIG: dict[str, Any] = {
    "quant_method": QUANT_METHOD,
    "format_version": 1,
    "bits": 8,
    "weights": "int8, symmetric, one float32 scale per output channel stored as <weight name>_scale",
    "modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "not_quantized": ["embed_tokens", "lm_head", "norms", "biases"],
}
_WEIGHT_FILES = re.compile(r"(\.safetensors|\.bin|\.pt|\.pth|\.safetensors\.index\.json|\.bin\.index\.json)$")


def quantize_checkpoint(
    src_dir: str | os.PathLike[str], dst_dir: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Write an int8 copy of the Hugging Face checkpoint `src_dir` to `dst_dir` (+ tokenizer/config files)."""
    src, dst = Path(src_dir), Path(dst_dir)
    load_model_config(src)  # same architecture checks as loading, so we never write an unloadable copy
    raw = read_config_json(src)
    if "quantization_config" in raw:
        raise ValueError(f"{src} is already quantized ({raw['quantization_config'].get('quant_method')!r})")
    if dst.exists() and dst.resolve() == src.resolve():
        raise ValueError("the output directory must differ from the source checkpoint")
    if dst.exists() and any(dst.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{dst} is not empty; choose a new directory or pass overwrite=True")
        for stale in dst.iterdir():
            if stale.is_file() and _WEIGHT_FILES.search(stale.name):
                stale.unlink()

    tensors = read_tensors(src)
    out = {}
    for name, t in tensors.items():
        if is_quantized_weight_name(name):
            q, s = quantize_weight(t)
            out[name], out[name + SCALE_SUFFIX] = q, s
        else:
            out[name] = t.contiguous()
    if not any(is_quantized_weight_name(n) for n in tensors):
        raise ModelLoadError(f"{src}: found no decoder projection weights to quantize")

    dst.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.iterdir()):
        if f.is_file() and f.name != "config.json" and not _WEIGHT_FILES.search(f.name):
            shutil.copy2(f, dst / f.name)
    tmp = dst / "model.safetensors.tmp"
    save_file(out, str(tmp), metadata={"format": "pt", "quantization": QUANT_METHOD})
    os.replace(tmp, dst / "model.safetensors")
    raw["quantization_config"] = dict(QUANTIZATION_CONFIG)
    (dst / "config.json").write_text(json.dumps(raw, indent=2, sort_keys=True) + "\n")
    return dst
