"""Per-request decoding settings, validated at construction so mistakes fail before any compute."""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from array import array
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_LOGPROBS = 20  # top alternatives per position, as vLLM's default limit


@dataclass
class SamplingParams:
    max_tokens: int = 256
    min_tokens: int = 0
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = -1  # -1 or 0 disables
    seed: int | None = None  # same seed, same tokens, whatever else is in the batch
    stop: list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    json_schema: dict[str, Any] | None = None  # constrain decoding so the output parses against this schema
    include_stop_str_in_output: bool = False
    # Log-probabilities under the model (log-softmax of the raw logits, before temperature, top-k/p and the
    # JSON-schema mask), as vLLM: None for none; k >= 0 for each output token's own log-probability plus those of
    # the k most likely tokens at its position. (True / False, this engine's older form, mean 0 / None.)
    logprobs: int | None = None
    n: int = 1  # samples per prompt, each with its own seed (seed, seed + 1, ...); all share the prompt's KV
    _validated: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        if isinstance(self.logprobs, bool):
            warnings.warn("SamplingParams(logprobs=True/False) is deprecated: pass logprobs=0 (the emitted token's "
                          "log-probability) or None", DeprecationWarning, stacklevel=3)
            self.logprobs = 0 if self.logprobs else None
        problems = []
        if self.logprobs is not None and (not isinstance(self.logprobs, int) or not 0 <= self.logprobs <= MAX_LOGPROBS):
            problems.append(f"logprobs must be None or an integer in [0, {MAX_LOGPROBS}], got {self.logprobs!r}")
        if not isinstance(self.n, int) or self.n < 1:
            problems.append(f"n must be an integer >= 1, got {self.n!r}")
        elif self.n > 1 and self.greedy:
            problems.append(f"n={self.n} with temperature 0 would give {self.n} identical greedy samples: set a "
                            "temperature > 0")
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            problems.append(f"max_tokens must be an integer >= 1, got {self.max_tokens!r}")
        if not isinstance(self.min_tokens, int) or self.min_tokens < 0:
            problems.append(f"min_tokens must be an integer >= 0, got {self.min_tokens!r}")
        elif isinstance(self.max_tokens, int) and self.min_tokens > self.max_tokens:
            problems.append(f"min_tokens ({self.min_tokens}) must not exceed max_tokens ({self.max_tokens})")
        if not isinstance(self.temperature, (int, float)) or not math.isfinite(self.temperature) or self.temperature < 0:
            problems.append(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if not isinstance(self.top_p, (int, float)) or not (0.0 < self.top_p <= 1.0):
            problems.append(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.top_k, int) or self.top_k < -1:
            problems.append(f"top_k must be -1 (disabled) or a positive integer, got {self.top_k!r}")
        if self.seed is not None and not isinstance(self.seed, int):
            problems.append(f"seed must be an integer or None, got {self.seed!r}")
        if self.stop is not None and (not isinstance(self.stop, list) or not all(isinstance(s, str) and s for s in self.stop)):
            problems.append(f"stop must be a list of non-empty strings, got {self.stop!r}")
        if self.stop_token_ids is not None and not all(isinstance(t, int) and t >= 0 for t in self.stop_token_ids):
            problems.append(f"stop_token_ids must be non-negative integers, got {self.stop_token_ids!r}")
        if self.json_schema is not None and not isinstance(self.json_schema, dict):
            problems.append("json_schema must be a dict holding a JSON schema")
        if problems:
            raise ValueError("invalid SamplingParams: " + "; ".join(problems))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


def request_seed(engine_seed: int, prompt_ids: list[int], params: SamplingParams) -> int:
    """Default sampling seed of a request without its own: derived from the engine seed, the prompt and the
    decoding parameters, so a request samples the same tokens whatever its position among the requests, whatever
    else is in the call and on whichever replica it runs. (Identical requests therefore get identical samples;
    give them distinct `seed`s to draw several.)"""
    fields = {k: v for k, v in asdict(params).items() if k not in ("seed", "_validated", "logprobs", "n")}
    h = hashlib.blake2b(digest_size=8)
    h.update(int(engine_seed).to_bytes(8, "little", signed=True))
    h.update(array("q", prompt_ids).tobytes())
    h.update(json.dumps(fields, sort_keys=True, default=str).encode())
    return int.from_bytes(h.digest(), "little") & 0x7FFFFFFFFFFFFFFF
