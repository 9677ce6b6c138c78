"""LoRA adapters (the `peft` format: adapter_config.json + adapter_model.safetensors), merged into the base weights
at load time.

Merging (W += scale * B @ A, in float32, before any cast or quantization) makes an adapted model an ordinary
model to the rest of the engine: the same kernels, batching, prefix cache and int8 path, at no per-token cost. The
engine serves one adapter per process, so per-request adapters (S-LoRA style) are not needed here.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.errors import ModelLoadError

_KEY = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.lora_(?P<ab>[AB])(?:\.default)?\.weight$")


@dataclass(frozen=True)
class LoraAdapter:
    path: Path
    rank: int
    scale: float
    pairs: dict[str, tuple[torch.Tensor, torch.Tensor]]  # HF weight name -> (A [r, in], B [out, r])

    @property
    def sha256(self) -> str:
        """Content hash of the adapter's weights file and config (part of a model's identity)."""
        h = hashlib.sha256()
        for name in ("adapter_config.json", "adapter_model.safetensors"):
            h.update((self.path / name).read_bytes())
        return h.hexdigest()


def read_lora(path: str | Path) -> LoraAdapter:
    # lazy: only adapter files need it
    from safetensors.torch import load_file

    path = Path(path)
    cfg_path, weights_path = path / "adapter_config.json", path / "adapter_model.safetensors"
    if not cfg_path.is_file() or not weights_path.is_file():
        raise ModelLoadError(f"{path}: not a LoRA adapter (needs adapter_config.json and adapter_model.safetensors)")
    cfg = json.loads(cfg_path.read_text())
    if cfg.get("peft_type", "LORA") != "LORA" or cfg.get("use_dora") or cfg.get("fan_in_fan_out"):
        raise ModelLoadError(f"{path}: only plain LoRA adapters are supported (no DoRA, no fan_in_fan_out)")
    if cfg.get("bias", "none") != "none":
        raise ModelLoadError(f"{path}: adapters that train biases are not supported (bias={cfg.get('bias')!r})")
    rank, alpha = int(cfg["r"]), float(cfg.get("lora_alpha", cfg["r"]))
    scale = alpha / math.sqrt(rank) if cfg.get("use_rslora") else alpha / rank
    halves: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in load_file(str(weights_path)).items():
        m = _KEY.match(key)
        if m is None:
            raise ModelLoadError(f"{path}: unexpected tensor {key!r} (only lora_A / lora_B weights are supported)")
        halves.setdefault(f"{m['module']}.weight", {})[m["ab"]] = tensor
    pairs = {}
    for name, ab in halves.items():
        if set(ab) != {"A", "B"}:
            raise ModelLoadError(f"{path}: {name} has lora_{'A' if 'A' in ab else 'B'} but not its pair")
        pairs[name] = (ab["A"], ab["B"])
    return LoraAdapter(path, rank, scale, pairs)


def merge_lora(tensors: dict[str, torch.Tensor], adapter: LoraAdapter) -> None:
    """Add each adapted module's low-rank update to its base weight in `tensors` (in place)."""
    for name, (a, b) in adapter.pairs.items():
        if name not in tensors:
            raise ModelLoadError(f"{adapter.path}: adapts {name}, which the base model does not have")
        w = tensors[name]
        if w.dtype in (torch.int8, torch.uint8):
            raise ModelLoadError(f"{adapter.path}: cannot merge into the already-quantized weight {name}")
        if tuple(b.shape[:1]) + tuple(a.shape[1:]) != tuple(w.shape) or a.shape[0] != b.shape[1]:
            raise ModelLoadError(f"{adapter.path}: {name} is {tuple(w.shape)} but the adapter's update is "
                                 f"{tuple(b.shape)} @ {tuple(a.shape)}")
        tensors[name] = (w.float() + adapter.scale * (b.float() @ a.float())).to(w.dtype)
