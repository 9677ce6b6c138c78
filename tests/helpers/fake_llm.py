"""A stand-in for `engine.LLM` with the same public surface, for fast pipeline tests.

It answers each request with a fixed schema-valid JSON for the request's schema (document vs.
account window), or with deliberately bad output for prompts containing a marker, so tests can
exercise validation failures without a model."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

GOOD_DOCUMENT = {"doc_type": "invoice", "issuer": "Example Supplies GmbH", "counterparty": "Test Customer AG",
                 "reference": "INV-1", "date": "2024-03-01", "currency": "EUR", "amount": "100.50",
                 "account": "DE02120300000000202051"}
GOOD_SECTION = {"summary": "The section describes the business and its risks.", "key_points": ["competition"]}
GOOD_WINDOW = {"classification": "net_outflow", "risk_level": "low", "flags": [], "narrative": "quiet month"}
BAD_MARKER = "FAIL-VALIDATION"
LAYOUT_FIELDS = ("date", "money", "currency", "counterparty", "description", "date_order", "decimal_mark")


class ByteTokenizer:
    """One token per UTF-8 byte (plus a BOS of 0): exact, deterministic counts."""

    def encode(self, text: str) -> list[int]:
        return [0] + [b + 2 for b in text.encode("utf-8")]

    def decode(self, ids: list[int]) -> str:
        return bytes(i - 2 for i in ids if i >= 2).decode("utf-8", "replace")


@dataclass
class _Metrics:
    num_cached_tokens: int = 0


@dataclass
class _Out:
    index: int
    prompt_token_ids: list[int]
    token_ids: list[int]
    text: str
    finish_reason: str
    error: str | None = None
    metrics: _Metrics = field(default_factory=_Metrics)
    logprobs: None = None

    @property
    def outputs(self) -> list[_Out]:
        """The engine's shape (`RequestOutput.outputs[0]` holds the sample); here the output is its own sample."""
        return [self]


class FakeLLM:
    def __init__(self, max_model_len: int = 4096, layout_answer: dict[str, str] | None = None,
                 constrained: bool = True) -> None:
        self.tokenizer = ByteTokenizer()
        self.max_model_len = max_model_len
        self.eos_token_ids = [1]
        self.calls: list[int] = []
        # a bank export's column question: these choices where offered, else each field's first option
        self.layout_answer = layout_answer or {}
        self.constrained = constrained  # False: answer as given even outside the schema (an engine without grammar)
        self.layout_prompts: list[str] = []

    def config_summary(self) -> dict[str, Any]:
        return {"fake": True, "max_model_len": self.max_model_len}

    def stats(self) -> dict[str, Any]:
        return {"steps": len(self.calls)}

    def generate_stream(self, prompts: list[list[int]], params: Any, progress: bool = True):
        self.calls.append(len(prompts))
        plist = params if isinstance(params, list) else [params] * len(prompts)
        for i, (ids, p) in enumerate(zip(prompts, plist)):
            prompt = self.tokenizer.decode(ids)
            props = (p.json_schema or {}).get("properties", {})
            if props and set(props) <= set(LAYOUT_FIELDS):
                self.layout_prompts.append(prompt)
                answer = {f: (self.layout_answer[f] if f in self.layout_answer and (
                    not self.constrained or self.layout_answer[f] in spec["enum"]) else spec["enum"][0])
                          for f, spec in props.items()}
                text = json.dumps(answer, separators=(",", ":"))
                yield _Out(index=i, prompt_token_ids=ids, token_ids=[2] * 8, text=text, finish_reason="stop")
                continue
            is_doc = "doc_type" in props
            answer = dict(GOOD_DOCUMENT if is_doc else GOOD_SECTION if "summary" in props else GOOD_WINDOW)
            if "summary" in props:
                if BAD_MARKER in prompt:  # a figure the section does not print
                    answer = {"summary": "Revenue was 98,765.43.", "key_points": []}
            elif BAD_MARKER in prompt:
                answer = {**answer, "date": "03/01/2024"} if is_doc else {**answer, "flags": ["structuring", "large_cash"]}
            text = json.dumps(answer, separators=(",", ":"))
            yield _Out(index=i, prompt_token_ids=ids, token_ids=list(range(len(text) // 4)), text=text,
                       finish_reason="stop")

    def stream(self, requests: Any, progress: bool = False, lookahead: int | None = None):
        """`LLM.stream`'s surface: every request read at once, then answered as `generate_stream` does."""
        reqs = list(requests)
        if not reqs:
            return
        yield from self.generate_stream([p for p, _ in reqs], [q for _, q in reqs], progress)

    def generate(self, prompts: list[list[int]], params: Any, progress: bool = True) -> list[_Out]:
        outs = list(self.generate_stream(prompts, params, progress))
        return sorted(outs, key=lambda o: o.index)

