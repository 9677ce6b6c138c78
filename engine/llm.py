"""Offline batch API: `LLM(model).generate(prompts, params)`, `model` a Hugging Face directory or a GGUF file."""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Iterable, Iterator
from collections.abc import Sequence as Seq
from pathlib import Path
from typing import Any

import torch

from engine.build import build_engine, structured_backend
from engine.config import EngineConfig
from engine.distributed.block_manager import ShardedBlockManager
from engine.outputs import RequestMetrics, RequestOutput
from engine.registry import ADAPTERS, REGISTRY, model_parts, resolve_model
from engine.sampling_params import SamplingParams, request_seed
from engine.sequence import Sequence


class LLM:
    """Loads a checkpoint (Hugging Face directory or GGUF file) and serves offline batches with continuous batching
    over a paged KV cache. `LLM(model, **settings)`: any `EngineSettings` field (engine/config.py), e.g.
    `LLM("path/to/model", dtype="float32", max_num_seqs=64)`; unknown names fail with one message naming them."""

    def __init__(self, model: str | os.PathLike[str], **settings: Any) -> None:
        model, settings = _resolve_model(model, settings)
        engine = build_engine(EngineConfig.build(model, **settings))
        self._engine = engine
        self.config = engine.config
        self.checkpoint_format = engine.checkpoint.format
        self.model_config = engine.checkpoint.config
        self.tokenizer = engine.checkpoint.tokenizer
        self.eos_token_ids = engine.checkpoint.eos_token_ids
        self.device, self.dtype, self.kernels, self.model = engine.device, engine.dtype, engine.kernels, engine.model
        assert engine.config.max_model_len is not None
        self.max_model_len: int = engine.config.max_model_len
        self.block_manager = engine.block_manager
        self.scheduler = engine.scheduler
        self._core = engine.core
        self.kv_caches = engine.runner.kv_caches  # read-only view (tests, tools); the runner owns the pool
        self.kv_cache_bytes = engine.runner.pool.bytes  # per rank under context parallelism
        self.speculative_config = engine.config.speculative_config
        self.adapter_sha256 = engine.adapter_sha256
        self.cpu_allocator_tuned = engine.cpu_allocator_tuned
        self._structured = engine.core.structured  # None until the first JSON-schema request, but see build
        # Stops a context-parallel engine's ranks when the LLM is closed, garbage-collected or the interpreter exits
        self._finalizer = weakref.finalize(self, engine.close)

    @property
    def _ranks(self) -> Any:
        return self._engine.ranks

    def close(self) -> None:
        """Stop the other ranks of a context-parallel engine (also done when the LLM is garbage-collected or the
        interpreter exits); a no-op otherwise."""
        self._finalizer()

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def uses_cuda_graphs(self) -> bool:
        return self._engine.uses_cuda_graphs

    # ------------------------------------------------------------------------------------------------------------
    def config_summary(self) -> dict[str, Any]:
        c = self.config
        return {
            "model_dir": str(c.model_dir),
            "adapter": str(c.adapter) if c.adapter is not None else None,
            "adapter_sha256": self.adapter_sha256,
            "checkpoint_format": self.checkpoint_format,
            "architecture": self.model_config.architecture,
            "dtype": str(self.dtype).replace("torch.", ""),
            "device": str(self.device),
            "max_num_seqs": c.max_num_seqs,
            "max_num_batched_tokens": c.max_num_batched_tokens,
            "block_size": c.block_size,
            "kv_cache_blocks": self.block_manager.num_blocks,
            "kv_cache_bytes": self.kv_cache_bytes,
            "memory_limit": c.memory_limit,
            "max_model_len": self.max_model_len,
            "enable_prefix_caching": c.enable_prefix_caching,
            "quantization": c.quantization,
            "kv_cache_dtype": c.kv_cache_dtype,
            "kernels": self.kernels.backend,
            "context_parallel_size": c.context_parallel_size,
            "cuda_graphs": self.uses_cuda_graphs,
            "speculative_config": (self.speculative_config.model_dump(mode="json")
                                   if self.speculative_config is not None else None),
            "cpu_allocator_tuned": self.cpu_allocator_tuned,
            "seed": c.seed,
        }

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV the cache holds: the most one request's prompt and output can take (all ranks together
        under context parallelism)."""
        return self.block_manager.num_blocks * self.config.block_size

    def reset_prefix_cache(self) -> bool:
        """Drop every cached prefix block, so the next batch is prefilled from scratch (benchmarks that repeat a
        workload need this). Returns False, and drops nothing, while requests hold blocks."""
        return self.block_manager.reset_prefix_cache()

    def stats(self) -> dict[str, Any]:
        bm = self.block_manager.stats
        cnt = self._core.counters
        return {
            "kv_blocks_total": bm.total,
            "kv_blocks_peak_used": bm.peak_used,
            **({"kv_blocks_peak_used_by_rank": list(self.block_manager.peak_used_by_rank)}
               if isinstance(self.block_manager, ShardedBlockManager) else {}),
            "kv_blocks_used": self.block_manager.num_used,
            "num_preemptions": self.scheduler.num_preemptions,
            "peak_running_seqs": self.scheduler.peak_running,
            "prefix_cache_queries": bm.prefix_queries,
            "prefix_cache_hits": bm.prefix_hits,
            "prefix_cache_hit_rate": (bm.prefix_hits / bm.prefix_queries) if bm.prefix_queries else 0.0,
            "prefix_cache_evictions": bm.evictions,
            "prefill_tokens_computed": cnt.prefill_tokens_computed,
            "prefill_tokens_cached": bm.prefix_hits,
            "prompt_tokens": cnt.prompt_tokens,
            "output_tokens": cnt.output_tokens,
            "steps": cnt.steps,
            "prefill_step_s": round(cnt.prefill_step_s, 4),
            "decode_step_s": round(cnt.decode_step_s, 4),
            "sample_s": round(cnt.sample_s, 4),
            "graph_steps": self._core.runner.graphs.replays if self._core.runner.graphs is not None else 0,
            **(self._core.speculator.counters.as_stats() if self._core.speculator is not None else {}),
        }

    def _structured_backend(self):
        if self._structured is None:
            self._structured = structured_backend(self._engine.checkpoint)
            if self._structured is None:
                raise ImportError("JSON-schema requests need llguidance (pip install llguidance)")
            self._core.structured = self._structured
        return self._structured

    # ------------------------------------------------------------------------------------------------------------
    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def chat(self, messages: Seq[dict[str, str]] | Seq[Seq[dict[str, str]]],
             sampling_params: SamplingParams | Seq[SamplingParams] | None = None, use_tqdm: bool = True,
             add_generation_prompt: bool = True) -> list[RequestOutput]:
        """vLLM's `LLM.chat`: one conversation (a list of {"role", "content"} messages) or a list of them, rendered
        with the model's chat template."""
        if not messages:
            raise ValueError("messages is empty: nothing to generate")
        conversations = [messages] if isinstance(messages[0], dict) else list(messages)  # type: ignore[list-item]
        prompts = [self.tokenizer.encode_chat(list(c), add_generation_prompt) for c in conversations]  # type: ignore[arg-type]
        return self.generate(prompts, sampling_params, use_tqdm)

    def _make_sequences(
        self, prompts: Seq[str] | Seq[Seq[int]], params: SamplingParams | Seq[SamplingParams] | None
    ) -> list[Sequence]:
        if not isinstance(prompts, Seq) or isinstance(prompts, bytes):
            raise TypeError("prompts must be a string, a list of strings or a list of token-id lists")
        if len(prompts) == 0:
            raise ValueError("prompts is empty: nothing to generate")
        if params is None:
            params = SamplingParams()
        if isinstance(params, SamplingParams):
            plist = [params] * len(prompts)
        else:
            plist = list(params)
            if len(plist) != len(prompts):
                raise ValueError(f"got {len(plist)} SamplingParams for {len(prompts)} prompts")
            if not all(isinstance(p, SamplingParams) for p in plist):
                raise TypeError("params must be SamplingParams or a list of them")
        vocab = self.model_config.vocab_size
        now = time.perf_counter()
        seqs = []
        for i, (prompt, p) in enumerate(zip(prompts, plist)):
            if isinstance(prompt, str):
                if not prompt:
                    raise ValueError(f"prompt {i} is empty")
                ids = self.tokenizer.encode(prompt)
            else:
                ids = [int(t) for t in prompt]
                bad = [t for t in ids if not 0 <= t < vocab]
                if bad:
                    raise ValueError(f"prompt {i} has token ids outside the vocabulary [0, {vocab}): {bad[:5]}")
            if not ids:
                raise ValueError(f"prompt {i} is empty")
            for j in range(p.n):  # samples of one prompt: seeds seed, seed + 1, ...; the prompt's KV is shared
                gen = None
                if not p.greedy:
                    seed = (p.seed if p.seed is not None else request_seed(self.config.seed, ids, p)) + j
                    gen = torch.Generator(device=self.device).manual_seed(seed & 0x7FFFFFFFFFFFFFFF)
                seq = Sequence(index=i, prompt_ids=ids, params=p, metrics=RequestMetrics(arrival_time=now),
                               generator=gen, sample_index=j)
                problem = self._request_problem(seq)
                if problem is not None:
                    seq.finish_reason = "error"
                    seq.error = problem
                seqs.append(seq)
        return seqs

    def _request_problem(self, seq: Sequence) -> str | None:
        """Why this one request cannot run (it then fails alone), or None; builds its grammar matcher."""
        p, vocab = seq.params, self.model_config.vocab_size
        if len(seq.prompt_ids) > self.max_model_len:
            return f"prompt has {len(seq.prompt_ids)} tokens, more than max_model_len={self.max_model_len}"
        bad = [t for t in p.stop_token_ids or [] if t >= vocab]
        if bad:
            return f"stop_token_ids {bad[:5]} lie outside the vocabulary [0, {vocab})"
        if p.json_schema is not None:
            try:
                seq.matcher = self._structured_backend().new_matcher(p.json_schema)
            except ValueError as exc:
                return str(exc)
        return None

    def generate_stream(
        self,
        prompts: str | Seq[str] | Seq[Seq[int]],
        params: SamplingParams | Seq[SamplingParams] | None = None,
        progress: bool = True,
    ) -> Iterator[RequestOutput]:
        """Yield each request's output as soon as all its samples finished (completion order; `output.index`
        maps back to the prompt)."""
        if isinstance(prompts, str):
            prompts = [prompts]
        seqs = self._make_sequences(prompts, params)  # every request checked before any runs
        texts = {i: p for i, p in enumerate(prompts) if isinstance(p, str)}
        yield from self._serve(iter(seqs), None, texts, len(seqs) if progress else None)

    def stream(
        self,
        requests: Iterable[tuple[str | Seq[int], SamplingParams | None]],
        progress: bool = False,
        lookahead: int | None = None,
    ) -> Iterator[RequestOutput]:
        """`generate_stream` for (prompt, params) requests read from an iterable as the engine has room for them:
        the next is read only while fewer than `lookahead` (default `max_num_seqs`) wait to be scheduled. A caller
        with its requests in groups (a batch job's buckets) keeps one continuous batch across them instead of
        draining the batch at the end of each group, and only requests near their turn hold a prompt and a
        grammar matcher. `output.index` is the request's position in the iterable; one that cannot run fails
        alone, and one that is malformed raises when it is read."""
        texts: dict[int, str] = {}

        def sequences() -> Iterator[Sequence]:
            for i, (prompt, p) in enumerate(requests):
                if isinstance(prompt, str):
                    texts[i] = prompt
                for seq in self._make_sequences([prompt], p):
                    seq.index = i
                    yield seq

        yield from self._serve(sequences(), lookahead or self.scheduler.max_num_seqs, texts, 0 if progress else None)

    def _serve(self, source: Iterator[Sequence], lookahead: int | None, texts: dict[int, str],
               total: int | None) -> Iterator[RequestOutput]:
        """Step the engine until `source` is read and every request finished, reading it while fewer than
        `lookahead` requests wait (None: all at once); a progress bar over `total` requests unless None."""
        samples: dict[int, int] = {}
        pending: dict[int, list[RequestOutput]] = {}
        bar = None
        if total is not None:
            from tqdm.auto import tqdm  # noqa: PLC0415

            bar = tqdm(total=total or None, desc="generate", unit="req", dynamic_ncols=True)
        start = time.perf_counter()
        out_tokens0 = self._core.counters.output_tokens
        read_all = False

        def feed() -> None:
            nonlocal read_all
            while not read_all and (lookahead is None or self.scheduler.num_waiting() < lookahead):
                seq = next(source, None)
                if seq is None:
                    read_all = True
                    return
                samples[seq.index] = seq.params.n
                if seq.finish_reason == "error":
                    self.scheduler.failed.append(seq)
                else:
                    self._core.add(seq)

        try:
            feed()
            while self._core.has_unfinished() or self.scheduler.failed:
                for out in self._core.step():
                    if samples[out.index] > 1:  # gather a prompt's samples into one output
                        got = pending.setdefault(out.index, [])
                        got.append(out)
                        if len(got) < samples[out.index]:
                            continue
                        out = _merged(pending.pop(out.index))
                    if out.index in texts:
                        out.prompt = texts.pop(out.index)  # type: ignore[assignment]
                    if bar is not None:
                        bar.update(1)
                        elapsed = max(time.perf_counter() - start, 1e-9)
                        bar.set_postfix(tok_s=f"{(self._core.counters.output_tokens - out_tokens0) / elapsed:.1f}")
                    yield out
                feed()
        finally:
            if bar is not None:
                bar.close()
            self._abort_unfinished()

    def _abort_unfinished(self) -> None:
        """If the caller stops consuming the stream, free everything so the engine is reusable."""
        self.scheduler.abort_all()

    def generate(
        self,
        prompts: str | Seq[str] | Seq[Seq[int]],
        params: SamplingParams | Seq[SamplingParams] | None = None,
        progress: bool = True,
        *,
        sampling_params: SamplingParams | Seq[SamplingParams] | None = None,
        use_tqdm: bool | None = None,
    ) -> list[RequestOutput]:
        """Outputs in input order, one per prompt (a single string prompt is a list of one). `sampling_params`
        and `use_tqdm` are vLLM's names for `params` and `progress`."""
        if isinstance(prompts, str):
            prompts = [prompts]
        if sampling_params is not None:
            if params is not None:
                raise TypeError("pass params or sampling_params, not both")
            params = sampling_params
        progress = progress if use_tqdm is None else use_tqdm
        outs: list[RequestOutput | None] = [None] * len(prompts)
        for out in self.generate_stream(prompts, params, progress=progress):
            outs[out.index] = out
        return outs  # type: ignore[return-value]


def _merged(parts: list[RequestOutput]) -> RequestOutput:
    """One prompt's samples (each finished as its own sequence) as one output, samples in index order."""
    parts.sort(key=lambda o: o.outputs[0].index)
    first = parts[0]
    errors = [o.error for o in parts if o.error]
    return RequestOutput(index=first.index, prompt_token_ids=first.prompt_token_ids,
                         outputs=[o.outputs[0] for o in parts], error="; ".join(errors) if errors else None,
                         metrics=first.metrics)


def _resolve_model(model: str | os.PathLike[str], settings: dict[str, Any]) -> tuple[str | os.PathLike[str], dict[str, Any]]:
    """A registered name (engine.registry) or a LoRA adapter directory as the base checkpoint it runs on, with the
    adapter among the settings; a path that exists wins over a name of the same spelling."""
    path = Path(model).expanduser()
    if not path.exists() and str(model) not in REGISTRY and str(model) not in ADAPTERS:
        return model, settings  # the checkpoint loader says what is wrong with it
    base, adapter = model_parts(resolve_model(model))
    if adapter is not None:
        if settings.get("adapter") is not None:
            raise ValueError(f"{model} is an adapter; do not pass adapter= as well")
        settings = {**settings, "adapter": adapter}
    return base, settings
