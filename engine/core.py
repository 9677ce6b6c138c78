"""The step loop: schedule, run the model, sample, update sequences, emit finished requests."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from engine.block_manager import BlockManager
from engine.outputs import CompletionOutput, RequestOutput, token_logprobs
from engine.runner import Runner
from engine.sampler import sample
from engine.scheduler import Scheduler
from engine.sequence import Sequence
from engine.speculative.speculator import Speculator
from engine.stop_checker import StopChecker
from engine.tokenizer import Tokenizer


@dataclass
class StepCounters:
    steps: int = 0
    prompt_tokens: int = 0
    prefill_tokens_computed: int = 0
    output_tokens: int = 0
    # Wall time of steps that computed prompt tokens (with whatever decodes rode along) and of decode-only steps,
    # and of that the sampling (logits processing and grammar masks). On CUDA the forward runs asynchronously, so
    # its time shows in sampling's, which waits on it.
    prefill_step_s: float = 0.0
    decode_step_s: float = 0.0
    sample_s: float = 0.0


class EngineCore:
    def __init__(
        self,
        scheduler: Scheduler,
        kv_manager: BlockManager,
        runner: Runner,
        tokenizer: Tokenizer,
        eos_ids: list[int],
        max_model_len: int,
    ) -> None:
        self.scheduler = scheduler
        self.kv_manager = kv_manager
        self.runner = runner
        self.tokenizer = tokenizer
        self.eos_ids = eos_ids
        self.stop_checker = StopChecker(tokenizer, eos_ids, max_model_len)
        self.counters = StepCounters()
        self.structured: Any = None  # set by LLM when a request carries a JSON schema
        self.speculator: Speculator | None = None  # set by LLM when it has a speculative_config

    def add(self, seq: Sequence) -> None:
        self.counters.prompt_tokens += seq.num_prompt_tokens
        self.scheduler.add(seq)

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    @torch.inference_mode()
    def step(self) -> list[RequestOutput]:
        """Run one engine step; return the requests that finished during it."""
        t_step = time.perf_counter()
        if self.speculator is not None:
            self.speculator.propose(self.scheduler.running, self.scheduler.max_num_batched_tokens, self.structured)
        batch = self.scheduler.schedule()
        finished = [self._output(s) for s in self.scheduler.take_failed()]
        if not batch.seqs:
            return finished
        fresh = self.kv_manager.take_fresh_blocks()
        if fresh:
            self.runner.zero_blocks(fresh)
        inputs = self.runner.prepare(batch)
        logits = self.runner.execute(inputs)
        prefilled = 0
        for seq, n in zip(batch.seqs, batch.num_tokens):
            if seq.is_prefilling:
                prefilled += min(n, seq.num_prompt_tokens - seq.num_computed_tokens)
            seq.num_computed_tokens += n  # KV written for these positions (drafts' too, until verified)
        t_sample = time.perf_counter()
        result = sample(logits, inputs.sampling_seqs, inputs.sample_counts, self.eos_ids, self.structured)
        now = time.perf_counter()
        c = self.counters
        c.steps += 1
        c.prefill_tokens_computed += prefilled
        c.sample_s += now - t_sample
        if prefilled:
            c.prefill_step_s += now - t_step
        else:
            c.decode_step_s += now - t_step
        logprobs = result.logprobs or [[] for _ in result.tokens]
        row0 = 0
        for seq, count, toks, error, lps in zip(inputs.sampling_seqs, inputs.sample_counts, result.tokens,
                                                result.errors, logprobs):
            if error is not None:
                self._set_finish(seq, "error", now, error)
            else:
                top = ([result.top_logprobs[r] for r in range(row0, row0 + len(toks))]
                       if result.top_logprobs and seq.params.logprobs else None)
                self._resolve(seq, toks, count - 1, now, lps, top)
            row0 += count
        done = []
        for seq in batch.seqs:
            if seq.draft_ids:  # the budget cut its verify step short: drafts are proposed again if at all
                seq.clear_drafts()
                seq.num_computed_tokens = min(seq.num_computed_tokens, seq.num_tokens - 1)
            self.scheduler.after_step(seq)
            if seq.finish_reason is not None:
                done.append(seq)
        for seq in done:
            self.scheduler.finish(seq)
            finished.append(self._output(seq))
        return finished

    def _resolve(self, seq: Sequence, sampled: list[int], verified: int, now: float,
                 logprobs: list[float] | None = None, top: list[list[tuple[int, float]]] | None = None) -> None:
        """Accept the sampled tokens of one sequence: sampled[j] follows draft j - 1, so the tokens up to and
        including the first one that differs from its draft are the target's own (greedy verification; rejection
        sampling never resamples a rejected draft, so the same rule holds); the KV of rejected drafts is rolled
        back, and tokens after a stop are dropped. `verified`: how many drafts this step checked."""
        drafts = seq.draft_ids
        seq.clear_drafts()
        accepted = len(sampled)
        for j, tok in enumerate(sampled):
            if j >= len(drafts) or tok != drafts[j]:
                accepted = j + 1
                break
        if self.speculator is not None:
            self.speculator.observe(seq, verified, accepted - 1)
        m = seq.metrics
        if m.first_token_time is None:
            m.first_token_time = now
        for j, tok in enumerate(sampled[:accepted]):
            seq.append([tok])
            if logprobs:
                seq.output_logprobs.append(logprobs[j])
            if top:
                seq.output_top_logprobs.append(top[j])
            self.counters.output_tokens += 1
            stop = self.stop_checker.check(seq, tok)
            if stop is not None:
                self._set_finish(seq, stop[0], now, stop[1])
                break
        # Valid KV covers the verified tokens except the newest (its KV is computed next step).
        seq.num_computed_tokens = min(seq.num_computed_tokens, seq.num_tokens - 1)
        if seq.finish_reason is None:
            self.kv_manager.truncate(seq, seq.num_tokens)

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
        completion = CompletionOutput(
            index=seq.sample_index, text=text, token_ids=seq.output_ids, finish_reason=seq.finish_reason or "error",
            logprobs=(token_logprobs(seq.output_ids, seq.output_logprobs, seq.output_top_logprobs, self.tokenizer)
                      if seq.params.logprobs is not None else None),
            cumulative_logprob=sum(seq.output_logprobs) if seq.params.logprobs is not None else None)
        return RequestOutput(index=seq.index, prompt_token_ids=seq.prompt_ids, outputs=[completion], error=seq.error,
                             metrics=m)
