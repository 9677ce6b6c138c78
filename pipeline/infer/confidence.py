"""How much to trust each extracted field: the log-probability the model gave the value it emitted.

The engine returns each output token's log-probability under the model itself (before the JSON-schema and
grounding masks, so a value the grammar forced but the model did not want scores low). A field's log-probability
is the sum over the tokens that spell its value in the compact JSON answer; exp() of it is the model's probability
of that exact value. Near 0 (probability near 1): the model was sure; well below: a row to check.
"""

from __future__ import annotations

import json
from typing import Any

_DECODER = json.JSONDecoder()


def value_spans(text: str, keys: tuple[str, ...]) -> dict[str, tuple[int, int]]:
    """Character span of each key's value in a compact JSON object whose keys come in `keys` order."""
    spans: dict[str, tuple[int, int]] = {}
    pos = 0
    for key in keys:
        marker = json.dumps(key) + ":"
        at = text.find(marker, pos)
        if at < 0:
            continue
        start = at + len(marker)
        try:
            _, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            break
        spans[key] = (start, end)
        pos = end
    return spans


def token_offsets(tokenizer: Any, token_ids: list[int]) -> list[tuple[int, int]]:
    """(start, end) character offsets of each token in the decoded text (a token that only completes a
    multi-byte character gets the character it completes)."""
    offsets, prev = [], 0
    for i in range(len(token_ids)):
        n = len(tokenizer.decode(token_ids[: i + 1]).rstrip("\ufffd"))
        n = max(n, prev)
        offsets.append((prev, n))
        prev = n
    return offsets


def emitted_logprobs(sample: Any) -> list[float] | None:
    """Each output token's own log-probability from an engine sample's per-position logprob maps (None when the
    request asked for none)."""
    maps = getattr(sample, "logprobs", None)
    if not maps:
        return None
    return [m[t].logprob for m, t in zip(maps, sample.token_ids)]


def field_logprobs(text: str, token_ids: list[int], logprobs: list[float] | None, tokenizer: Any,
                   keys: tuple[str, ...]) -> dict[str, float | None] | None:
    """Per-field log-probability of the emitted value (None without logprobs)."""
    if not logprobs or len(logprobs) != len(token_ids):
        return None
    offsets = token_offsets(tokenizer, token_ids)
    out: dict[str, float | None] = {k: None for k in keys}
    for key, (start, end) in value_spans(text, keys).items():
        total = sum(lp for (a, b), lp in zip(offsets, logprobs) if a < end and b > start)
        out[key] = round(total, 6)
    return out
