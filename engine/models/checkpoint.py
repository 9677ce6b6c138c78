"""One interface over the checkpoint formats the engine loads: a Hugging Face directory (config.json, safetensors,
tokenizer.json) or a single GGUF file. Everything the engine needs comes from here: the model config, tokenizer,
EOS ids, and the weights under Hugging Face names."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from engine.errors import ModelLoadError
from engine.models.config import ModelConfig, load_model_config
from engine.models.gguf import (
    gguf_model_config,
    gguf_tensors,
    gguf_tokenizer,
    is_gguf,
    read_gguf,
)
from engine.models.weights import (
    checkpoint_quantization,
    is_quantized_weight_name,
    read_tensors,
)
from engine.tokenizer import Tokenizer
from kernels.reference.int8_gemm import quantize_weight


@dataclass
class Checkpoint:
    path: Path
    format: Literal["hf", "gguf"]
    config: ModelConfig
    tokenizer: Tokenizer
    eos_token_ids: list[int]
    stored_quantization: str | None  # "int8" for a `pipeline quantize` directory
    gguf: Any = field(default=None, repr=False)  # the parsed GGUFFile (parsing a real file's vocabulary takes seconds)

    def tensors(self, int8: bool = False) -> dict[str, torch.Tensor]:
        """Hugging Face-named weights. `int8`: a GGUF file's decoder projections come back already quantized to
        the engine's int8 layout (weight + `_scale`), straight from each dequantized tensor."""
        if self.format == "hf":
            return read_tensors(self.path)
        return gguf_tensors(self.gguf, self.config, int8=quantize_weight if int8 else None,
                            is_projection=is_quantized_weight_name)


def _generation_eos(model_dir: Path) -> list[int]:
    gen_path = model_dir / "generation_config.json"
    if not gen_path.is_file():
        return []
    try:
        gen = json.loads(gen_path.read_text())
    except json.JSONDecodeError as exc:
        raise ModelLoadError(f"{gen_path}: invalid JSON ({exc})") from exc
    eos = gen.get("eos_token_id")
    return [eos] if isinstance(eos, int) else list(eos or [])


def open_checkpoint(path: str | Path) -> Checkpoint:
    """Reads config and tokenizer (not the weights) of a model directory or GGUF file."""
    path = Path(path)
    f = None
    if path.is_dir():
        cfg = load_model_config(path)
        tokenizer = Tokenizer.from_dir(path)
        eos = list(cfg.eos_token_ids) + _generation_eos(path)
        fmt: Literal["hf", "gguf"] = "hf"
        stored = checkpoint_quantization(path)
    elif path.is_file():
        if not is_gguf(path):
            raise ModelLoadError(f"{path}: not a GGUF file (no GGUF magic) and not a model directory")
        f = read_gguf(path)
        cfg, tokenizer, fmt, stored = gguf_model_config(f), gguf_tokenizer(f), "gguf", None
        eos = list(cfg.eos_token_ids)
    else:
        raise ModelLoadError(f"model {str(path)!r} does not exist (a Hugging Face directory or a .gguf file)")
    if tokenizer.eos_token_id is not None:
        eos.append(tokenizer.eos_token_id)
    return Checkpoint(path=path, format=fmt, config=cfg, tokenizer=tokenizer,
                      eos_token_ids=sorted({int(i) for i in eos}), stored_quantization=stored, gguf=f)
