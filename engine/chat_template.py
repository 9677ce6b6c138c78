"""Renders a model's Jinja chat template the way transformers' `apply_chat_template` does: a sandboxed
environment with trim_blocks/lstrip_blocks and loop controls, `tojson` without HTML escaping, `raise_exception`
and `strftime_now`, the special tokens as variables. Templates ship inside checkpoints, so they are untrusted code:
the sandbox is jinja2's immutable one."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def _raise(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class ChatTemplate:
    def __init__(self, source: str, special_tokens: dict[str, str]) -> None:
        self.source = source
        self.sha256 = hashlib.sha256(source.encode("utf-8")).hexdigest()
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = _strftime_now
        try:
            self._template = env.from_string(source)
        except jinja2.exceptions.TemplateSyntaxError as exc:
            raise ValueError(f"chat template does not parse: {exc}") from exc
        self._special = dict(special_tokens)

    def render(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        for m in messages:
            if not isinstance(m, dict) or "role" not in m:
                raise TypeError(f"chat messages are dicts with 'role' and 'content'; got {m!r}")
        return self._template.render(messages=messages, add_generation_prompt=add_generation_prompt, **self._special)
