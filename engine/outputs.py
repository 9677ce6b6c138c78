"""What `LLM.generate` returns per request."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestMetrics:
    arrival_time: float
    first_token_time: float | None = None
    finish_time: float | None = None
    num_prompt_tokens: int = 0
    num_cached_tokens: int = 0
    num_output_tokens: int = 0
    num_preemptions: int = 0
    # Speculative decoding: tokens drafted for this request, how many of them verification accepted, and in how
    # many verify steps (accepted / verify steps is the mean accepted length).
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    num_verify_steps: int = 0

    @property
    def ttft(self) -> float | None:
        """Time to first token, from arrival."""
        return None if self.first_token_time is None else self.first_token_time - self.arrival_time

    @property
    def e2e(self) -> float | None:
        return None if self.finish_time is None else self.finish_time - self.arrival_time

    @property
    def tpot(self) -> float | None:
        """Mean time per output token after the first."""
        if self.first_token_time is None or self.finish_time is None or self.num_output_tokens < 2:
            return None
        return (self.finish_time - self.first_token_time) / (self.num_output_tokens - 1)

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "arrival_time": self.arrival_time,
            "first_token_time": self.first_token_time,
            "finish_time": self.finish_time,
            "ttft": self.ttft,
            "tpot": self.tpot,
            "e2e": self.e2e,
            "num_prompt_tokens": self.num_prompt_tokens,
            "num_cached_tokens": self.num_cached_tokens,
            "num_output_tokens": self.num_output_tokens,
            "num_preemptions": self.num_preemptions,
            "num_draft_tokens": self.num_draft_tokens,
            "num_accepted_tokens": self.num_accepted_tokens,
            "num_verify_steps": self.num_verify_steps,
        }


@dataclass
class Logprob:
    """One token's log-probability at one position, as vLLM reports it."""

    logprob: float
    rank: int | None = None  # 1 = the most likely token at this position; None: outside the top k asked for
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    """One sample of a request (vLLM's `outputs[i]`)."""

    index: int  # which of the request's `n` samples
    text: str
    token_ids: list[int]
    finish_reason: str  # "stop" | "length" | "error"
    # per output token: its own log-probability and the top k (SamplingParams.logprobs = k), by token id
    logprobs: list[dict[int, Logprob]] | None = field(default=None, repr=False)
    cumulative_logprob: float | None = None
    stop_reason: str | int | None = None

    def finished(self) -> bool:
        return True


def token_logprobs(token_ids: list[int], own: list[float], top: list[list[tuple[int, float]]],
                   tokenizer: Any) -> list[dict[int, Logprob]]:
    """Per output token: the top alternatives (ranked) and the emitted token (its rank when among them)."""
    out = []
    for j, (tok, lp) in enumerate(zip(token_ids, own)):
        alts = top[j] if j < len(top) else []
        entry = {t: Logprob(v, rank, tokenizer.decode([t])) for rank, (t, v) in enumerate(alts, start=1)}
        if tok not in entry:
            entry[tok] = Logprob(lp, None, tokenizer.decode([tok]))
        out.append(entry)
    return out


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"RequestOutput.{old} is deprecated and goes in the next release: use {new}", DeprecationWarning,
                  stacklevel=3)


@dataclass
class RequestOutput:
    """What `LLM.generate` returns per prompt, shaped as vLLM's: `outputs[i]` holds the i-th of `n` samples."""

    index: int  # the prompt's position in the call
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    error: str | None
    metrics: RequestMetrics = field(repr=False)  # of the first sample
    prompt: str | None = None
    finished: bool = True

    @property
    def request_id(self) -> str:
        return str(self.index)

    @property
    def ok(self) -> bool:
        return all(o.finish_reason != "error" for o in self.outputs)

    # This engine's older, flat form: the first sample's fields. Kept for one release.
    @property
    def text(self) -> str:
        _deprecated("text", "outputs[0].text")
        return self.outputs[0].text

    @property
    def token_ids(self) -> list[int]:
        _deprecated("token_ids", "outputs[0].token_ids")
        return self.outputs[0].token_ids

    @property
    def finish_reason(self) -> str:
        _deprecated("finish_reason", "outputs[0].finish_reason")
        return self.outputs[0].finish_reason

    @property
    def logprobs(self) -> list[float] | None:
        _deprecated("logprobs", "outputs[0].logprobs")
        first = self.outputs[0]
        if first.logprobs is None:
            return None
        return [d[t].logprob for d, t in zip(first.logprobs, first.token_ids)]
