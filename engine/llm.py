"""Offline batch API: `LLM(model).generate(prompts, params)`, `model` a Hugging Face directory or a GGUF file."""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Iterator
from collections.abc import Sequence as Seq
from pathlib import Path
from typing import Any

import torch

from engine.block_manager import BlockManager
from engine.config import EngineConfig
from engine.core import EngineCore
from engine.cpu_runtime import keep_freed_memory
from engine.devices import resolve_device, resolve_dtype
from engine.distributed.block_manager import ShardedBlockManager
from engine.kv_pool import default_kv_budget, kv_bytes_per_token
from engine.model_runner import ModelRunner
from engine.models.checkpoint import open_checkpoint
from engine.models.loader import build_model, num_weights
from engine.models.lora import read_lora
from engine.outputs import RequestMetrics, RequestOutput
from engine.sampling_params import SamplingParams, request_seed
from engine.scheduler import Scheduler
from engine.sequence import Sequence
from engine.speculative import SpeculativeConfig
from engine.speculative.builder import TargetInfo, build_speculator
from kernels import get_kernels


def _close_ranks(runner: Any, ranks: Any) -> None:
    try:
        runner.close()
    finally:
        ranks.close()


class LLM:
    """Loads a checkpoint (Hugging Face directory or GGUF file) and serves offline batches with continuous batching
    over a paged KV cache."""

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        dtype: str = "auto",
        device: str = "auto",
        max_num_seqs: int = 128,
        max_num_batched_tokens: int = 2048,
        kv_cache_memory: int | None = None,
        block_size: int = 16,
        max_model_len: int | None = None,
        seed: int = 0,
        enable_prefix_caching: bool = True,
        quantization: str | None = None,
        kernels: str = "auto",
        kv_cache_dtype: str = "auto",
        adapter: str | os.PathLike[str] | None = None,
        speculative_config: dict[str, Any] | SpeculativeConfig | None = None,
        context_parallel_size: int = 1,
        cuda_graphs: bool = True,
    ) -> None:
        ckpt = open_checkpoint(model_dir)
        quantization = quantization or ckpt.stored_quantization  # pre-quantized checkpoints say so in config.json
        self.config = EngineConfig(
            model_dir=Path(model_dir),
            adapter=Path(adapter) if adapter is not None else None,
            dtype=dtype,  # type: ignore[arg-type]
            device=device,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            kv_cache_memory=kv_cache_memory,
            block_size=block_size,
            max_model_len=max_model_len,
            seed=seed,
            enable_prefix_caching=enable_prefix_caching,
            quantization=quantization,  # type: ignore[arg-type]
            kernels=kernels,  # type: ignore[arg-type]
            kv_cache_dtype=kv_cache_dtype,  # type: ignore[arg-type]
            context_parallel_size=context_parallel_size,
            cuda_graphs=cuda_graphs,
        )
        self.checkpoint_format = ckpt.format
        self.model_config = cfg = ckpt.config
        self.tokenizer = ckpt.tokenizer
        self.device = resolve_device(self.config.device)
        self.dtype = resolve_dtype(self.config.dtype, cfg, self.device)
        self.cpu_allocator_tuned = self.device.type == "cpu" and keep_freed_memory()
        self.max_model_len = self.config.max_model_len or cfg.max_position_embeddings
        if self.max_model_len > cfg.max_position_embeddings:
            raise ValueError(
                f"max_model_len {self.max_model_len} exceeds the model's max_position_embeddings "
                f"{cfg.max_position_embeddings}"
            )
        self.eos_token_ids = ckpt.eos_token_ids
        self.kernels = get_kernels(self.device, prefer=self.config.kernels)
        lora = read_lora(self.config.adapter) if self.config.adapter is not None else None
        self.adapter_sha256 = lora.sha256 if lora is not None else None
        # Default KV: room for max_num_seqs full-length sequences, within the device's caps.
        kv_tokens_wanted = self.config.max_num_seqs * (self.max_model_len + self.config.block_size)
        self._ranks = None
        if self.config.context_parallel_size > 1:
            runner = self._start_context_parallel(ckpt, lora, kv_tokens_wanted, speculative_config)
            self.model = runner.model
            self.kernels = runner.model.k
            self.block_manager: BlockManager = ShardedBlockManager(
                self.config.context_parallel_size, runner.pool.num_blocks, self.config.block_size,
                self.config.enable_prefix_caching)
        else:
            self.model = build_model(ckpt, self.dtype, self.device, self.kernels, self.config.quantization, lora)
            runner = ModelRunner(
                self.model, dtype=self.dtype, device=self.device, block_size=self.config.block_size,
                kv_budget=self.config.kv_cache_memory, kv_tokens_wanted=kv_tokens_wanted,
                quantized_kv=self.config.kv_cache_dtype == "int8", max_model_len=self.max_model_len,
                decode_layout=self.kernels.decode_layout,
            )
            self.block_manager = BlockManager(runner.pool.num_blocks, self.config.block_size,
                                              self.config.enable_prefix_caching)
            if self.uses_cuda_graphs:
                runner.enable_decode_graphs(min(self.config.max_num_seqs, self.config.max_num_batched_tokens),
                                            capture=True)
        self.kv_caches = runner.kv_caches  # read-only view (tests, tools); the runner owns the pool
        self.kv_cache_bytes = runner.pool.bytes  # per rank under context parallelism
        self.scheduler = Scheduler(self.block_manager, self.config.max_num_seqs, self.config.max_num_batched_tokens)
        self._core = EngineCore(self.scheduler, runner, self.tokenizer, self.eos_token_ids, self.max_model_len)
        self._structured = None
        self.speculative_config = (SpeculativeConfig.model_validate(speculative_config)
                                   if isinstance(speculative_config, dict) else speculative_config)
        if self.speculative_config is not None:
            self._core.speculator = build_speculator(self.speculative_config, TargetInfo(
                model_config=cfg, tokenizer=self.tokenizer, device=self.device, dtype=self.dtype,
                kernels=self.kernels, block_size=self.config.block_size,
                kv_tokens=runner.pool.num_blocks * self.config.block_size, max_model_len=self.max_model_len,
                max_num_batched_tokens=self.config.max_num_batched_tokens,
                num_parameters=num_weights(self.model),
            ))

    def _start_context_parallel(self, ckpt: Any, lora: Any, kv_tokens_wanted: int, speculative_config: Any) -> Any:
        """Start (or attach) the other ranks, build rank 0's model and KV shard, and wait for theirs."""
        from engine.distributed.worker import RankGroup, RankSpec, build_runner  # noqa: PLC0415

        c, n = self.config, self.config.context_parallel_size
        if speculative_config is not None:
            raise ValueError("speculative decoding is not supported with context_parallel_size > 1")
        if self.model_config.sliding_window is not None:
            raise ValueError("context parallelism does not support sliding-window attention")
        quantized_kv = c.kv_cache_dtype == "int8"
        budget = c.kv_cache_memory
        if budget is None:  # the ranks of one CPU machine share its memory (the single-process default, split);
            # GPUs each have their own
            wanted = kv_tokens_wanted * kv_bytes_per_token(self.model_config, self.dtype, quantized_kv)
            budget = (default_kv_budget(self.device, wanted) // n if self.device.type == "cpu"
                      else default_kv_budget(self.device, wanted // n))
        spec = RankSpec(model_dir=str(c.model_dir), adapter=str(c.adapter) if c.adapter is not None else None,
                        dtype=str(self.dtype).replace("torch.", ""), device=self.device.type, kernels=c.kernels,
                        quantization=c.quantization, kv_cache_dtype=c.kv_cache_dtype, block_size=c.block_size,
                        max_model_len=self.max_model_len, kv_budget=budget, world_size=n,
                        threads=max(1, torch.get_num_threads() // n) if self.device.type == "cpu" else 0)
        self._ranks = RankGroup(spec)
        try:
            runner = build_runner(spec, self._ranks.comm, ckpt, lora)
            self._ranks.connect()
        except BaseException:
            self._ranks.close()
            raise
        self._finalizer = weakref.finalize(self, _close_ranks, runner, self._ranks)
        return runner

    def close(self) -> None:
        """Stop the other ranks of a context-parallel engine (also done when the LLM is garbage-collected or the
        interpreter exits); a no-op otherwise."""
        if self._ranks is not None:
            self._finalizer()

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def uses_cuda_graphs(self) -> bool:
        """Graphs need every op capturable (the Triton kernels read no value back to the host) and one process
        (context parallelism exchanges tensors between ranks each layer)."""
        return (self.config.cuda_graphs and self.device.type == "cuda" and self.kernels.backend == "triton"
                and self.config.context_parallel_size == 1)

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
            "graph_steps": self._core.runner.graphs.replays if self._core.runner.graphs is not None else 0,
            **(self._core.speculator.counters.as_stats() if self._core.speculator is not None else {}),
        }

    def _structured_backend(self):
        if self._structured is None:
            from engine.structured import StructuredOutputBackend  # noqa: PLC0415 - optional dependency

            self._structured = StructuredOutputBackend(
                self.tokenizer.to_json(), self.model_config.vocab_size, self.eos_token_ids
            )
            self._core.structured = self._structured
        return self._structured

    # ------------------------------------------------------------------------------------------------------------
    def _make_sequences(
        self, prompts: Seq[str] | Seq[Seq[int]], params: SamplingParams | Seq[SamplingParams] | None
    ) -> list[Sequence]:
        if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Seq):
            raise TypeError("prompts must be a list of strings or a list of token-id lists")
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
            gen = None
            if not p.greedy:
                seed = p.seed if p.seed is not None else request_seed(self.config.seed, ids, p)
                gen = torch.Generator(device=self.device).manual_seed(seed)
            seq = Sequence(index=i, prompt_ids=ids, params=p, metrics=RequestMetrics(arrival_time=now), generator=gen)
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
        prompts: Seq[str] | Seq[Seq[int]],
        params: SamplingParams | Seq[SamplingParams] | None = None,
        progress: bool = True,
    ) -> Iterator[RequestOutput]:
        """Yield each request's output as soon as it finishes (completion order; `output.index` maps back)."""
        seqs = self._make_sequences(prompts, params)
        bar = None
        if progress:
            from tqdm.auto import tqdm  # noqa: PLC0415

            bar = tqdm(total=len(seqs), desc="generate", unit="req", dynamic_ncols=True)
        start = time.perf_counter()
        out_tokens0 = self._core.counters.output_tokens
        try:
            for seq in seqs:
                if seq.finish_reason == "error":
                    self.scheduler.failed.append(seq)
                else:
                    self._core.add(seq)
            while self._core.has_unfinished() or self.scheduler.failed:
                for out in self._core.step():
                    if bar is not None:
                        bar.update(1)
                        elapsed = max(time.perf_counter() - start, 1e-9)
                        bar.set_postfix(tok_s=f"{(self._core.counters.output_tokens - out_tokens0) / elapsed:.1f}")
                    yield out
        finally:
            if bar is not None:
                bar.close()
            self._abort_unfinished()

    def _abort_unfinished(self) -> None:
        """If the caller stops consuming the stream, free everything so the engine is reusable."""
        self.scheduler.abort_all()

    def generate(
        self,
        prompts: Seq[str] | Seq[Seq[int]],
        params: SamplingParams | Seq[SamplingParams] | None = None,
        progress: bool = True,
    ) -> list[RequestOutput]:
        """Outputs in input order."""
        outs: list[RequestOutput | None] = [None] * len(prompts)
        for out in self.generate_stream(prompts, params, progress=progress):
            outs[out.index] = out
        return outs  # type: ignore[return-value]
