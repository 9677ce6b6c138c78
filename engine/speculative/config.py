"""`speculative_config`: which proposer drafts tokens and how many (shaped like vLLM's, so users recognise it)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SpeculativeConfig(BaseModel):
    """Validated speculative-decoding settings.

    method "ngram": prompt lookup, i.e. the tokens that followed the latest earlier occurrence of the sequence's
    last n tokens (n from prompt_lookup_max down to prompt_lookup_min) in its prompt and output so far.
    method "draft_model": a small model with the target's tokenizer proposes, with its own paged KV cache.

    With either, tokens a JSON-schema grammar forces next are drafted first, for free (no proposer involved).
    How many tokens a sequence drafts in a step adapts to its running acceptance rate, and drafting stops when
    the step is compute-bound and the expected accepted tokens would not pay for the extra query tokens.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["ngram", "draft_model"]
    num_speculative_tokens: int = Field(4, ge=1, le=32, description="most tokens a sequence drafts per step")
    prompt_lookup_min: int | None = Field(None, ge=1)
    prompt_lookup_max: int | None = Field(None, ge=1)
    model: Path | None = Field(None, description="draft model: a Hugging Face directory or a GGUF file")
    draft_dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    draft_quantization: Literal["int8"] | None = None
    draft_kv_cache_memory: int | None = Field(None, ge=1, description="bytes; None: as many tokens as the target's")
    # Cost model of one target step, in units of one query token's compute: a step of N query tokens costs about
    # max(N, compute_bound_tokens) + step_overhead_tokens. Below the knee extra query tokens are nearly free
    # (the step is bound by reading the weights); above it each one costs as much as a decoded token. None picks
    # the device's measured default.
    compute_bound_tokens: int | None = Field(None, ge=1)
    step_overhead_tokens: float | None = Field(None, ge=0)
    adaptive: bool = Field(True, description="adapt each sequence's draft length to its acceptance rate")
    grammar_fast_forward: bool = Field(True, description="draft the tokens a JSON-schema grammar forces")

    @model_validator(mode="after")
    def _check(self) -> "SpeculativeConfig":
        if self.method == "draft_model" and self.model is None:
            raise ValueError("speculative_config method 'draft_model' needs 'model' (a directory or GGUF file)")
        if self.method == "ngram" and self.model is not None:
            raise ValueError("speculative_config method 'ngram' takes no 'model'")
        lo, hi = self.lookup_range
        if lo > hi:
            raise ValueError(f"prompt_lookup_min ({lo}) must not exceed prompt_lookup_max ({hi})")
        return self

    @property
    def lookup_range(self) -> tuple[int, int]:
        """(min, max) n-gram length; one given alone sets both, like vLLM."""
        lo, hi = self.prompt_lookup_min, self.prompt_lookup_max
        if lo is None and hi is None:
            return 2, 5
        if lo is None:
            return hi, hi  # type: ignore[return-value]
        if hi is None:
            return lo, lo
        return lo, hi
