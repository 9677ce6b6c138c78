"""The model's tokenizer: a Hugging Face `tokenizers` pipeline plus its special tokens and chat template.

Built from a `tokenizer.json` directory (`Tokenizer.from_dir`) or from GGUF metadata
(`engine.models.gguf.gguf_tokenizer`); no transformers at run time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as _HFTokenizer

from engine.chat_template import ChatTemplate
from engine.errors import ModelLoadError


class Tokenizer:
    def __init__(self, backend: _HFTokenizer, config: dict[str, Any], source: str) -> None:
        """`config`: tokenizer_config.json-style keys (bos_token, eos_token, chat_template, ...)."""
        self._tok = backend
        self.config = config
        self.source = source
        template = config.get("chat_template")
        self.chat_template = ChatTemplate(template, self._special_strings()) if template else None

    @classmethod
    def from_dir(cls, model_dir: Path) -> "Tokenizer":
        path = model_dir / "tokenizer.json"
        if not path.is_file():
            raise ModelLoadError(f"{model_dir}: no tokenizer.json")
        try:
            backend = _HFTokenizer.from_file(str(path))
        except Exception as exc:
            raise ModelLoadError(f"{path}: cannot load tokenizer ({exc})") from exc
        cfg_path = model_dir / "tokenizer_config.json"
        try:
            config = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
        except json.JSONDecodeError as exc:
            raise ModelLoadError(f"{cfg_path}: invalid JSON ({exc})") from exc
        config["chat_template"] = _dir_chat_template(model_dir, config.get("chat_template"))
        return cls(backend, config, source=str(path))

    def to_json(self) -> str:
        """The `tokenizer.json` text (what llguidance builds its token trie from)."""
        return self._tok.to_str()

    def same_vocabulary(self, other: "Tokenizer") -> bool:
        """Whether both map every token string to the same id (a GGUF file's rebuilt tokenizer and the directory
        it came from serialise differently but agree here): the test a draft model must pass."""
        return self._tok.get_vocab(with_added_tokens=True) == other._tok.get_vocab(with_added_tokens=True)

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

    def _special_strings(self) -> dict[str, str]:
        names = ("bos_token", "eos_token", "unk_token", "pad_token")
        return {n: v for n in names if (v := self._named_token(n)) is not None}

    @property
    def eos_token_id(self) -> int | None:
        return self.token_id(self._named_token("eos_token"))

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def encode_batch(self, texts: list[str], add_special_tokens: bool = True) -> list[list[int]]:
        return [e.ids for e in self._tok.encode_batch(texts, add_special_tokens=add_special_tokens)]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """The conversation as the model was trained to read it (text; encode it with add_special_tokens=False,
        as the template writes any BOS itself)."""
        if self.chat_template is None:
            raise ValueError(f"{self.source}: this tokenizer has no chat template")
        return self.chat_template.render(messages, add_generation_prompt=add_generation_prompt)

    def encode_chat(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> list[int]:
        return self.encode(self.apply_chat_template(messages, add_generation_prompt), add_special_tokens=False)


def _dir_chat_template(model_dir: Path, configured: Any) -> str | None:
    """transformers' places: `chat_template.jinja`, else tokenizer_config.json's `chat_template` (a string, or a
    list of named templates of which we use "default")."""
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    if isinstance(configured, list):
        named = {t.get("name"): t.get("template") for t in configured if isinstance(t, dict)}
        return named.get("default")
    return configured if isinstance(configured, str) and configured else None
