"""The step loop: schedule, run the model, sample, update sequences, emit finished requests."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from engine.model_runner import ModelRunner
from engine.outputs import RequestOutput
from engine.sampler import sample
from engine.scheduler import Scheduler
from engine.sequence import Sequence
from engine.tokenizer import Tokenizer


@dataclass
class StepCounters:
    steps: int = 0
    prompt_tokens: int = 0
    prefill_tokens_computed: int = 0
    output_tokens: int = 0


class EngineCore:
    def __init__(
        self,
        scheduler: Scheduler,
        runner: ModelRunner,
        tokenizer: Tokenizer,
        eos_ids: list[int],
        max_model_len: int,
    ) -> None:
        self.scheduler = scheduler
        self.runner = runner
        self.tokenizer = tokenizer
        self.eos_ids = eos_ids
        self._eos_set = frozenset(eos_ids)
        self.max_model_len = max_model_len
        self.counters = StepCounters()
        self.structured: Any = None  # set by LLM when a request carries a JSON schema

    def add(self, seq: Sequence) -> None:
        self.counters.prompt_tokens += seq.num_prompt_tokens
        self.scheduler.add(seq)

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    @torch.inference_mode()
    def step(self) -> list[RequestOutput]:
        """Run one engine step; return the requests that finished during it."""
        batch = self.scheduler.schedule()
        finished = [self._output(s) for s in self.scheduler.take_failed()]
        if not batch.seqs:
            return finished
        fresh = self.scheduler.bm.take_fresh_blocks()
        if fresh:
            self.runner.zero_blocks(fresh)
        inputs = self.runner.prepare(batch)
        logits = self.runner.execute(inputs)
        for seq, n in zip(batch.seqs, batch.num_tokens):
            if seq.num_computed_tokens < seq.num_prompt_tokens:
                self.counters.prefill_tokens_computed += min(n, seq.num_prompt_tokens - seq.num_computed_tokens)
        self.scheduler.after_step(batch)
        tokens = sample(logits, inputs.sampling_seqs, self.eos_ids, self.structured) if inputs.sampling_seqs else []
        now = time.perf_counter()
        self.counters.steps += 1
        for seq, tok in zip(inputs.sampling_seqs, tokens):
            self._append(seq, tok, now)
            if seq.finish_reason is not None:
                self.scheduler.finish(seq)
                finished.append(self._output(seq))
        return finished

    def _append(self, seq: Sequence, tok: int, now: float) -> None:
        seq.token_ids.append(tok)
        self.counters.output_tokens += 1
        m = seq.metrics
        if m.first_token_time is None:
            m.first_token_time = now
        p = seq.params
        n_out = seq.num_output_tokens
        if seq.matcher is not None:
            try:
                seq.matcher.accept(tok)
            except ValueError as exc:
                if tok not in self._eos_set:
                    self._set_finish(seq, "error", now, f"structured output violated: {exc}")
                    return
        if not p.ignore_eos and tok in self._eos_set and n_out >= p.min_tokens:
            self._set_finish(seq, "stop", now)
        elif p.stop_token_ids and tok in p.stop_token_ids and n_out >= p.min_tokens:
            self._set_finish(seq, "stop", now)
        elif seq.matcher is not None and seq.matcher.is_finished():
            self._set_finish(seq, "stop", now)
        elif p.stop and n_out >= p.min_tokens and self._stop_string_hit(seq):
            self._set_finish(seq, "stop", now)
        elif n_out >= p.max_tokens or seq.num_tokens >= self.max_model_len:
            self._set_finish(seq, "length", now)

    def _stop_string_hit(self, seq: Sequence) -> bool:
        text = self.tokenizer.decode(seq.output_ids)
        best = None
        for s in seq.params.stop or []:
            idx = text.find(s)
            if idx >= 0 and (best is None or idx < best[0]):
                best = (idx, len(s))
        if best is None:
            return False
        seq.stop_text_end = best[0] + (best[1] if seq.params.include_stop_str_in_output else 0)
        return True

    @staticmethod
    def _set_finish(seq: Sequence, reason: str, now: float, error: str | None = None) -> None:
        seq.finish_reason = reason
        seq.error = error
        seq.metrics.finish_time = now

    def _output(self, seq: Sequence) -> RequestOutput:
        m = seq.metrics
        if m.finish_time is None:
            m.finish_time = time.perf_counter()
        m.num_prompt_tokens = seq.num_prompt_tokens
        m.num_output_tokens = seq.num_output_tokens
        text = self.tokenizer.decode(seq.output_ids) if seq.output_ids else ""
        if seq.stop_text_end is not None:
            text = text[: seq.stop_text_end]
        return RequestOutput(
            index=seq.index,
            prompt_token_ids=seq.prompt_ids,
            token_ids=seq.output_ids,
            text=text,
            finish_reason=seq.finish_reason or "error",
            error=seq.error,
            metrics=m,
        )
