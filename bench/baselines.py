"""Hugging Face baselines on the same requests: naive static-batch `generate`, and transformers' continuous batching.

Both run greedy with EOS disabled so every request produces exactly its workload output length, like the engine.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import torch

from bench.config import BenchJob
from bench.metrics import RequestRecord
from bench.results import SystemRun, SystemUnavailable
from bench.workload import BenchRequest, Workload, warmup_prompts

_PAD_ID = 0


def _load_model(job: BenchJob, attn_implementation: str) -> tuple[Any, float]:
    # lazy: heavy, and only the HF baselines and loading checks need it
    import transformers

    t0 = time.perf_counter()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        job.model_dir, dtype=getattr(torch, job.dtype), attn_implementation=attn_implementation
    )
    model = model.to(job.device).eval()
    # EOS off everywhere: generate() merges the model's own generation config into the one passed in.
    model.generation_config.eos_token_id = None
    return model, time.perf_counter() - t0


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class _StepClock:
    """A stopping criterion that never stops: generate() calls it once per new token, which timestamps each step."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.times: list[float] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        _sync(self.device)
        self.times.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def left_padded(prompts: list[list[int]], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), _PAD_ID, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
        mask[i, width - len(p):] = 1
    return ids.to(device), mask.to(device)


def _generate(model: Any, prompts: list[list[int]], new_tokens: int, device: str) -> tuple[list[list[int]], list[float]]:
    """One static batch: returns the generated ids per row and the per-step timestamps."""
    # lazy: heavy, and only the HF baselines and loading checks need it
    from transformers import GenerationConfig, StoppingCriteriaList

    ids, mask = left_padded(prompts, device)
    clock = _StepClock(device)
    cfg = GenerationConfig(
        do_sample=False, max_new_tokens=new_tokens, min_new_tokens=0, eos_token_id=None, pad_token_id=_PAD_ID,
        use_cache=True,
    )
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids, attention_mask=mask, generation_config=cfg, stopping_criteria=StoppingCriteriaList([clock])
        )
    gen = out[:, ids.shape[1]:].tolist()
    return gen, clock.times


def run_hf_generate(job: BenchJob, workload: Workload) -> SystemRun:
    """Static batches of `batch_size` in arrival order; each batch runs to its longest request and returns together."""
    model, load_s = _load_model(job, job.hf.attn_implementation)
    if job.warmup:
        _generate(model, warmup_prompts(workload.vocab_size, frozenset(job.reserved_ids)), 2, job.device)
    bs = job.hf.batch_size
    records: list[RequestRecord] = []
    t0 = time.perf_counter()
    for start in range(0, len(workload.requests), bs):
        batch: tuple[BenchRequest, ...] = workload.requests[start:start + bs]
        longest = max(r.output_len for r in batch)
        gen, steps = _generate(model, [list(r.prompt_token_ids) for r in batch], longest, job.device)
        done = time.perf_counter()
        if any(len(g) != longest for g in gen) or len(steps) != longest:
            raise RuntimeError(f"HF generate returned {[len(g) for g in gen]} tokens, expected {longest} for every row")
        for r, g in zip(batch, gen):
            records.append(
                RequestRecord(
                    index=r.index,
                    prompt_tokens=len(r.prompt_token_ids),
                    output_tokens=r.output_len,
                    ttft_s=steps[0] - t0,
                    e2e_s=done - t0,  # results of a static batch are delivered when the whole batch returns
                    token_ids=g[: r.output_len],
                )
            )
    wall = time.perf_counter() - t0
    return SystemRun(
        records=records,
        wall_s=wall,
        load_s=load_s,
        config={"batch_size": bs, "attn_implementation": job.hf.attn_implementation, "execution": "eager (no compile)",
                "decoding": "greedy", "padding": "left"},
        notes=["output tokens beyond each request's own length (batch runs to its longest) are computed but not counted"],
    )


def _cb_api() -> tuple[Any, Any]:
    """transformers' continuous-batching config classes, or SystemUnavailable if this version lacks them."""
    try:
        from transformers import ContinuousBatchingConfig  # type: ignore[attr-defined]
        # lazy: heavy, and only the HF baselines and loading checks need it
        from transformers.generation.continuous_batching.utils import WorkloadHints
    except ImportError as e:
        # lazy: heavy, and only the HF baselines and loading checks need it
        import transformers

        raise SystemUnavailable(f"transformers {transformers.__version__} has no continuous batching API ({e})") from e
    return ContinuousBatchingConfig, WorkloadHints


def run_hf_continuous_batching(job: BenchJob, workload: Workload) -> SystemRun:
    """transformers' own paged continuous batching (ContinuousBatchingManager), every request submitted at t = 0."""
    # lazy: heavy, and only the HF baselines and loading checks need it
    import transformers
    from transformers import GenerationConfig

    cb_config_cls, hints_cls = _cb_api()
    model, load_s = _load_model(job, job.hf.attn_implementation)
    if not hasattr(model, "continuous_batching_context_manager"):
        raise SystemUnavailable(f"transformers {transformers.__version__} models lack continuous_batching_context_manager")
    page = job.hf.cb_page_size
    # Size the KV pool to hold every request at once, as the engine may: without psutil transformers cannot size it on CPU.
    num_blocks = sum(math.ceil((len(r.prompt_token_ids) + r.output_len) / page) + 1 for r in workload.requests)
    budget = job.hf.cb_max_batch_tokens or job.engine.max_num_batched_tokens
    cb_config = cb_config_cls(page_size=page, num_blocks=num_blocks, max_batch_tokens=budget)
    hints = hints_cls(
        max_prompt_length=max(len(r.prompt_token_ids) for r in workload.requests),
        max_generated_length=max(r.output_len for r in workload.requests),
        num_requests=len(workload.requests),
    )
    gen_cfg = GenerationConfig(do_sample=False, eos_token_id=-1, pad_token_id=_PAD_ID,
                               max_new_tokens=max(r.output_len for r in workload.requests))
    cb_logger = logging.getLogger("ContinuousBatchingLogger")
    old_level = cb_logger.level
    cb_logger.setLevel(logging.CRITICAL)  # it logs an ERROR about psutil even when num_blocks is given
    results: dict[str, Any] = {}
    try:
        t_setup = time.perf_counter()
        with torch.inference_mode(), model.continuous_batching_context_manager(
            generation_config=gen_cfg, continuous_batching_config=cb_config, block=True, timeout=30,
            warmup=job.warmup, workload_hints=hints,
        ) as manager:
            setup_s = time.perf_counter() - t_setup
            resolved = manager.continuous_batching_config
            t0 = time.perf_counter()
            for r in workload.requests:
                manager.add_request(list(r.prompt_token_ids), request_id=f"r{r.index}", max_new_tokens=r.output_len,
                                    record_timestamps=True, eos_token_id=-1)
            while len(results) < len(workload.requests):
                res = manager.get_result(timeout=1.0)
                if res is None:
                    if not manager.is_running():
                        raise RuntimeError(f"transformers' CB thread stopped after {len(results)} of "
                                           f"{len(workload.requests)} requests")
                    continue
                if res.is_finished():
                    results[res.request_id] = res
            wall = time.perf_counter() - t0
    finally:
        cb_logger.setLevel(old_level)
    records: list[RequestRecord] = []
    for r in workload.requests:
        res = results[f"r{r.index}"]
        if res.error is not None:
            raise RuntimeError(f"transformers' CB failed request {r.index}: {res.error}")
        toks = list(res.generated_tokens)
        if len(toks) != r.output_len:
            raise RuntimeError(f"transformers' CB returned {len(toks)} tokens for request {r.index}, expected {r.output_len}")
        stamps = res.timestamps or []
        finish = res.lifespan[1] if res.lifespan[1] > 0 else (stamps[-1] if stamps else None)
        records.append(
            RequestRecord(
                index=r.index,
                prompt_tokens=len(r.prompt_token_ids),
                output_tokens=r.output_len,
                ttft_s=(stamps[0] - t0) if stamps else None,
                e2e_s=(finish - t0) if finish is not None else None,
                token_ids=toks,
            )
        )
    return SystemRun(
        records=records,
        wall_s=wall,
        load_s=load_s + setup_s,
        config={
            "attn_implementation": model.config._attn_implementation,
            "page_size": resolved.page_size,
            "num_blocks": resolved.num_blocks,
            "max_batch_tokens": resolved.max_batch_tokens,
            "max_requests_per_batch": resolved.max_requests_per_batch,
            "allow_block_sharing": resolved.allow_block_sharing,
            "scheduler_type": resolved.scheduler_type,
            "transformers": transformers.__version__,
        },
        notes=["transformers does not report prefix-sharing hits per request, so its hit rate is not shown"],
    )
