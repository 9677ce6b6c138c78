"""Reading a Hugging Face checkpoint's weights (safetensors only: no pickle, no remote code) and recognising how
they are stored: float, or int8 as `engine.quantization` writes it (each decoder projection as int8 [out, in]
beside a float32 `<name>_scale` [out], and a `quantization_config` entry in config.json)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from engine.errors import ModelLoadError

QUANT_METHOD = "engine_int8"
SCALE_SUFFIX = "_scale"
_QUANTIZED_NAME = re.compile(r"^model\.layers\.\d+\.(self_attn\.[qkvo]_proj|mlp\.(gate|up|down)_proj)\.weight$")


def is_quantized_weight_name(name: str) -> bool:
    return _QUANTIZED_NAME.match(name) is not None


def read_config_json(model_dir: Path) -> dict[str, Any]:
    """config.json of a model directory, as written (a clear error when it is missing or malformed)."""
    path = model_dir / "config.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ModelLoadError(f"{model_dir}: no config.json (is this a Hugging Face model directory?)") from exc
    except json.JSONDecodeError as exc:
        raise ModelLoadError(f"{path}: invalid JSON ({exc})") from exc


def checkpoint_quantization(model_dir: str | os.PathLike[str]) -> str | None:
    """"int8" for a checkpoint written by `quantize_checkpoint`, None for a float one; rejects other schemes."""
    qc = read_config_json(Path(model_dir)).get("quantization_config")
    if qc is None:
        return None
    method = qc.get("quant_method") if isinstance(qc, dict) else None
    if method != QUANT_METHOD:
        raise ModelLoadError(
            f"{model_dir}: quantization_config.quant_method {method!r} is not supported; only checkpoints "
            f"written by `pipeline quantize` ({QUANT_METHOD!r}) can be loaded pre-quantized"
        )
    return "int8"




def _weight_files(model_dir: Path) -> list[Path]:
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError) as exc:
            raise ModelLoadError(f"{index}: malformed index file ({exc})") from exc
        files = sorted({model_dir / name for name in weight_map.values()})
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise ModelLoadError(f"{model_dir}: shard(s) listed in the index are missing: {', '.join(missing)}")
        return files
    single = model_dir / "model.safetensors"
    if single.is_file():
        return [single]
    if any(model_dir.glob("*.bin")) or any(model_dir.glob("*.pt")):
        raise ModelLoadError(f"{model_dir}: only pickle weights (*.bin/*.pt) found; convert them to safetensors")
    raise ModelLoadError(f"{model_dir}: no model.safetensors or model.safetensors.index.json")


def read_tensors(model_dir: Path) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for path in _weight_files(model_dir):
        try:
            with safe_open(str(path), framework="pt") as f:
                for name in f.keys():
                    tensors[name] = f.get_tensor(name)
        except Exception as exc:  # safetensors raises several types for corrupt files
            raise ModelLoadError(f"{path}: cannot read safetensors ({exc})") from exc
    return tensors
