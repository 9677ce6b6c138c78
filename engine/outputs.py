"""What `LLM.generate` returns per request."""

from __future__ import annotations

from dataclasses import dataclass, field


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
class RequestOutput:
    index: int
    prompt_token_ids: list[int]
    token_ids: list[int]
    text: str
    finish_reason: str  # "stop" | "length" | "error"
    error: str | None
    metrics: RequestMetrics = field(repr=False)
    logprobs: list[float] | None = field(default=None, repr=False)  # per output token, when params.logprobs

    @property
    def ok(self) -> bool:
        return self.finish_reason != "error"
