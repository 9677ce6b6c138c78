"""Engine construction: from one `EngineConfig` to the parts of a running engine (model, runner, KV blocks,
scheduler, step loop). `LLM` is the API over what this builds; the context-parallel variant is one branch here
(its runner and sharded block manager behind the same `Runner` and `BlockManager` interfaces), not a second
engine class."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from engine.block_manager import BlockManager
from engine.config import EngineConfig
from engine.core import EngineCore
from engine.cpu_runtime import keep_freed_memory, return_freed_memory
from engine.devices import resolve_device, resolve_dtype
from engine.distributed.block_manager import ShardedBlockManager
from engine.kv_pool import (
    allocate_kv_pool,
    default_kv_budget,
    kv_budget,
    kv_bytes_per_token,
)
from engine.memory_budget import plan_kv_within_limit
from engine.model_runner import ModelRunner
from engine.models.checkpoint import Checkpoint, open_checkpoint
from engine.models.loader import build_model, num_weights
from engine.models.lora import LoraAdapter, read_lora
from engine.runner import Runner
from engine.scheduler import Scheduler
from engine.speculative.builder import TargetInfo, build_speculator
from kernels import Kernels, get_kernels

log = logging.getLogger(__name__)


@dataclass
class Engine:
    """What `build_engine` made. `config` is resolved: quantization as the checkpoint stores it, max_model_len
    set."""

    config: EngineConfig
    checkpoint: Checkpoint
    device: torch.device
    dtype: torch.dtype
    kernels: Kernels
    model: Any  # engine.models.llama.LlamaModel (rank 0's under context parallelism)
    runner: Runner
    block_manager: BlockManager
    scheduler: Scheduler
    core: EngineCore
    adapter_sha256: str | None
    cpu_allocator_tuned: bool
    ranks: Any = None  # engine.distributed.worker.RankGroup under context parallelism

    def close(self) -> None:
        """Stop the other ranks of a context-parallel engine; a no-op otherwise."""
        if self.ranks is not None:
            try:
                self.runner.close()
            finally:
                self.ranks.close()
                self.ranks = None

    @property
    def uses_cuda_graphs(self) -> bool:
        return _uses_cuda_graphs(self.config, self.device, self.kernels)


def _uses_cuda_graphs(c: EngineConfig, device: torch.device, kernels: Kernels) -> bool:
    """Graphs need every op capturable (the Triton kernels read no value back to the host) and one process
    (context parallelism exchanges tensors between ranks each layer)."""
    return c.cuda_graphs and device.type == "cuda" and kernels.backend == "triton" and c.context_parallel_size == 1


def _resolve(config: EngineConfig, ckpt: Checkpoint) -> EngineConfig:
    limit = ckpt.config.max_position_embeddings
    max_model_len = config.max_model_len or limit
    if max_model_len > limit:
        raise ValueError(f"max_model_len {max_model_len} exceeds the model's max_position_embeddings {limit}")
    # pre-quantized checkpoints say so in config.json
    return config.model_copy(update={"quantization": config.quantization or ckpt.stored_quantization,
                                     "max_model_len": max_model_len})


def _kv_tokens_wanted(c: EngineConfig) -> int:
    """The default KV pool: room for max_num_seqs full-length sequences (within the device's caps)."""
    assert c.max_model_len is not None
    return c.max_num_seqs * (c.max_model_len + c.block_size)


def structured_backend(ckpt: Checkpoint) -> Any:
    """The JSON-schema decoder's backend (its token trie is tens of MiB on a real vocabulary), or None where its
    optional dependency is missing."""
    try:
        from engine.structured import StructuredOutputBackend  # noqa: PLC0415 - optional dependency
    except ImportError:
        return None
    return StructuredOutputBackend(ckpt.tokenizer.to_json(), ckpt.config.vocab_size, ckpt.eos_token_ids)


def build_engine(config: EngineConfig) -> Engine:
    ckpt = open_checkpoint(config.model_dir)
    c = _resolve(config, ckpt)
    assert c.max_model_len is not None
    device = resolve_device(c.device)
    dtype = resolve_dtype(c.dtype, ckpt.config, device)
    lora = read_lora(c.adapter) if c.adapter is not None else None
    ranks = None
    structured = None  # built by LLM at its first JSON-schema request, unless a memory limit must count it
    if c.context_parallel_size > 1:
        runner, ranks = _start_context_parallel(c, ckpt, lora, device, dtype)
        model, kernels = runner.model, runner.model.k
        bm: BlockManager = ShardedBlockManager(c.context_parallel_size, runner.pool.num_blocks, c.block_size,
                                               c.enable_prefix_caching)
    else:
        kernels = get_kernels(device, prefer=c.kernels)
        model = build_model(ckpt, dtype, device, kernels, c.quantization, lora)
        quantized_kv = c.kv_cache_dtype == "int8"
        budget = kv_budget(c.kv_cache_memory, device, _kv_tokens_wanted(c), ckpt.config, dtype, quantized_kv)
        if c.memory_limit is not None:
            if device.type != "cpu":
                raise ValueError("memory_limit applies to CPU engines; on a GPU give kv_cache_memory")
            # the limit's accounting needs the allocator as the steps will run: tuned, load transients handed back
            keep_freed_memory()
            structured = structured_backend(ckpt)  # built now, so that the plan counts it
            plan = plan_kv_within_limit(c, ckpt, model, dtype, device, cap=budget)
            log.info("%s", plan.describe())
            budget = plan.kv_budget
        pool = allocate_kv_pool(ckpt.config, dtype, device, c.block_size, budget, quantized_kv)
        runner = ModelRunner(model, pool, dtype=dtype, device=device, max_model_len=c.max_model_len,
                             decode_layout=kernels.decode_layout)
        # A CPU pool's pages cost memory only once written: reuse freed blocks before touching new ones.
        bm = BlockManager(pool.num_blocks, c.block_size, c.enable_prefix_caching, touched_first=device.type == "cpu")
        if _uses_cuda_graphs(c, device, kernels):
            runner.enable_decode_graphs(min(c.max_num_seqs, c.max_num_batched_tokens), capture=True)
    scheduler = Scheduler(bm, c.max_num_seqs, c.max_num_batched_tokens)
    core = EngineCore(scheduler, bm, runner, ckpt.tokenizer, ckpt.eos_token_ids, c.max_model_len)
    core.structured = structured
    if c.speculative_config is not None:
        core.speculator = build_speculator(c.speculative_config, TargetInfo(
            model_config=ckpt.config, tokenizer=ckpt.tokenizer, device=device, dtype=dtype, kernels=kernels,
            block_size=c.block_size, kv_tokens=runner.pool.num_blocks * c.block_size, max_model_len=c.max_model_len,
            max_num_batched_tokens=c.max_num_batched_tokens, num_parameters=num_weights(model)))
    # Tuned only now: under the tuned allocator every transient of loading (a GGUF's dequantised copies, float
    # weights replaced by int8, a merged adapter's deltas, fused projections) would stay in the heap until the trim
    # below, and raise the process's peak by that much.
    tuned = device.type == "cpu" and keep_freed_memory()
    if tuned:  # what loading freed into the heap (glibc keeps small chunks, and a second engine in this process
        # loads under the tuned allocator): hand it back once
        return_freed_memory()
    return Engine(config=c, checkpoint=ckpt, device=device, dtype=dtype, kernels=kernels, model=model, runner=runner,
                  block_manager=bm, scheduler=scheduler, core=core,
                  adapter_sha256=lora.sha256 if lora is not None else None, cpu_allocator_tuned=tuned, ranks=ranks)


def _start_context_parallel(c: EngineConfig, ckpt: Checkpoint, lora: LoraAdapter | None, device: torch.device,
                            dtype: torch.dtype) -> tuple[Any, Any]:
    """Start (or attach) the other ranks, build rank 0's model and KV shard, and wait for theirs. The ranks receive
    this config itself, with the dtype and the per-rank KV budget resolved."""
    # lazy: the rank machinery (subprocesses, torch.distributed) loads only for context-parallel engines
    from engine.distributed.worker import RankGroup, RankSpec, build_runner  # noqa: PLC0415

    n = c.context_parallel_size
    if c.speculative_config is not None:
        raise ValueError("speculative decoding is not supported with context_parallel_size > 1")
    if ckpt.config.sliding_window is not None:
        raise ValueError("context parallelism does not support sliding-window attention")
    budget = c.kv_cache_memory
    if budget is None:  # the ranks of one CPU machine share its memory (the single-process default, split);
        # GPUs each have their own
        wanted = _kv_tokens_wanted(c) * kv_bytes_per_token(ckpt.config, dtype, c.kv_cache_dtype == "int8")
        budget = (default_kv_budget(device, wanted) // n if device.type == "cpu"
                  else default_kv_budget(device, wanted // n))
    rank_config = c.model_copy(update={"dtype": str(dtype).replace("torch.", ""), "device": device.type,
                                       "kv_cache_memory": budget})
    spec = RankSpec(config=rank_config,
                    threads=max(1, torch.get_num_threads() // n) if device.type == "cpu" else 0)
    ranks = RankGroup(spec)
    try:
        runner = build_runner(spec, ranks.comm, ckpt, lora)
        ranks.connect()
    except BaseException:
        ranks.close()
        raise
    return runner, ranks
