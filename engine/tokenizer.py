"""Thin wrapper over a Hugging Face `tokenizer.json` (the `tokenizers` library; no transformers at run time)."""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer as _HFTokenizer

from engine.errors import ModelLoadError


class Tokenizer:
    def __init__(self, model_dir: Path) -> None:
        path = model_dir / "tokenizer.json"
        if not path.is_file():
            raise ModelLoadError(f"{model_dir}: no tokenizer.json")
        try:
            self._tok = _HFTokenizer.from_file(str(path))
        except Exception as exc:
            raise ModelLoadError(f"{path}: cannot load tokenizer ({exc})") from exc
        self.path = path
        cfg_path = model_dir / "tokenizer_config.json"
        self.config = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def token_id(self, token: str | None) -> int | None:
        return None if token is None else self._tok.token_to_id(token)

    def _named_token(self, key: str) -> str | None:
        value = self.config.get(key)
        if isinstance(value, dict):  # older configs store AddedToken dicts
            value = value.get("content")
        return value

    @property
    def eos_token_id(self) -> int | None:
        return self.token_id(self._named_token("eos_token"))

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: list[str], add_special_tokens: bool = True) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(texts, add_special_tokens=add_special_tokens)]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)
