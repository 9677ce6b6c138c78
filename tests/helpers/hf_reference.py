"""Greedy reference tokens from Hugging Face transformers, one prompt at a time (no padding effects)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch


@lru_cache(maxsize=8)
def _model(path: str):
    import transformers

    return transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def hf_greedy(model_dir: Path, prompt: list[int], max_new_tokens: int, ignore_eos: bool = False) -> list[int]:
    model = _model(str(model_dir))
    kwargs = {"min_new_tokens": max_new_tokens} if ignore_eos else {}
    with torch.inference_mode():
        out = model.generate(
            torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=1, **kwargs,
        )
    return out[0, len(prompt):].tolist()
