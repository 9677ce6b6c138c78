"""One ladder step through the engine's public API (`engine.LLM`), measured exactly like the baselines."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bench.config import BenchJob
from bench.metrics import RequestRecord
from bench.results import SystemRun, SystemUnavailable
from bench.workload import Workload, warmup_prompts
from engine import LLM, SamplingParams

SPECULATIVE_RUNG = {"method": "ngram", "num_speculative_tokens": 4}


@dataclass(frozen=True)
class LadderStep:
    """One optimisation added on top of the previous steps. `llm_kwargs` None means the engine has no switch yet."""

    name: str
    llm_kwargs: dict[str, Any] | None
    unavailable_reason: str = ""


# Each step keeps the switches of the steps above it. Fill in a row's kwargs when the engine grows the feature.
# The first three run the plain torch kernels ("reference"); "+ compiled/fused kernels" switches on the C++ ones
# (native decode attention, int8 passes, fused elementwise steps), which every engine user gets by default;
# "+ INT8 KV cache" then halves the bytes per cached token (changes outputs slightly, like INT8 weights).
LADDER: tuple[LadderStep, ...] = (
    LadderStep("engine_paged", {"enable_prefix_caching": False, "kernels": "reference"}),
    LadderStep("engine_prefix_cache", {"enable_prefix_caching": True, "kernels": "reference"}),
    LadderStep("engine_int8", {"enable_prefix_caching": True, "quantization": "int8", "kernels": "reference"}),
    LadderStep("engine_compiled", {"enable_prefix_caching": True, "quantization": "int8", "kernels": "auto"}),
    LadderStep("engine_kv_int8", {"enable_prefix_caching": True, "quantization": "int8", "kernels": "auto",
                                  "kv_cache_dtype": "int8"}),
    # Prompt lookup on top: greedy tokens identical to the rung above; what it saves depends on how much of the
    # output repeats the input (little on the standard workload's random tokens; see `--workload extraction`).
    # By default it builds on "+ INT8 KV cache"; `--speculative-on RUNG` picks another base (CPUs without VNNI,
    # where the int8 rungs do not finish).
    LadderStep("engine_speculative", {"speculative_config": SPECULATIVE_RUNG}),
)
LADDER_BY_NAME: dict[str, LadderStep] = {s.name: s for s in LADDER}

# Counters from LLM.stats() that accumulate, so a before/after difference isolates the measured run from warmup.
_COUNTERS = ("num_preemptions", "prefill_tokens_computed", "prefill_tokens_cached", "prompt_tokens", "output_tokens", "steps",
             "prefill_step_s", "decode_step_s", "sample_s",
             "spec_verify_steps", "spec_draft_tokens", "spec_accepted_tokens", "spec_forced_tokens")


def stats_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    return {k: after[k] - before.get(k, 0) for k in _COUNTERS if isinstance(after.get(k), (int, float))}


def run_engine_step(job: BenchJob, workload: Workload, step: LadderStep) -> SystemRun:
    if step.llm_kwargs is None:
        raise SystemUnavailable(step.unavailable_reason, status="not_available")

    switches = dict(step.llm_kwargs)
    if step.name == "engine_speculative":
        switches = {**(LADDER_BY_NAME[job.engine.speculative_base].llm_kwargs or {}), **switches}
    kwargs: dict[str, Any] = dict(
        dtype=job.dtype,
        device=job.device,
        seed=0,
        max_num_seqs=job.engine.max_num_seqs,
        max_num_batched_tokens=job.engine.max_num_batched_tokens,
        kv_cache_memory=job.engine.kv_cache_memory,
        block_size=job.engine.block_size,
        **switches,
    )
    t_load = time.perf_counter()
    try:
        llm = LLM(str(job.model_dir), **kwargs)
    except (NotImplementedError, ValueError) as e:
        if "quantization" in switches:
            raise SystemUnavailable(f"engine rejected {switches}: {type(e).__name__}: {e}") from e
        raise
    load_s = time.perf_counter() - t_load

    if job.warmup:
        llm.generate(warmup_prompts(workload.vocab_size, frozenset(job.reserved_ids)),
                     SamplingParams(max_tokens=4, min_tokens=4, ignore_eos=True), progress=False)
    prompts = [list(r.prompt_token_ids) for r in workload.requests]
    params = [SamplingParams(max_tokens=r.output_len, min_tokens=r.output_len, temperature=0.0, ignore_eos=True)
              for r in workload.requests]
    before = dict(llm.stats())
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, progress=False)
    wall = time.perf_counter() - t0
    after = dict(llm.stats())

    records: list[RequestRecord] = []
    for r, out in zip(workload.requests, outs, strict=True):
        if out.index != r.index:
            raise RuntimeError(f"engine returned output {out.index} at position {r.index}: outputs out of input order")
        sample = out.outputs[0]
        if sample.finish_reason == "error" or len(sample.token_ids) != r.output_len:
            raise RuntimeError(f"engine request {r.index}: finish_reason={sample.finish_reason!r} error={out.error!r}, "
                               f"{len(sample.token_ids)} tokens, expected {r.output_len}")
        m = out.metrics
        records.append(
            RequestRecord(
                index=r.index,
                prompt_tokens=len(r.prompt_token_ids),
                output_tokens=len(sample.token_ids),
                ttft_s=m.ttft,
                e2e_s=m.e2e,
                tpot_s=m.tpot,
                cached_tokens=int(m.num_cached_tokens),
                token_ids=list(sample.token_ids),
            )
        )
    delta = stats_delta(before, after)
    config = {"llm_kwargs": {k: v for k, v in kwargs.items()}}
    try:
        config["engine_config"] = llm.config_summary()
    except Exception as e:  # the summary is context, not a measurement: never lose the row over it
        config["engine_config_error"] = f"{type(e).__name__}: {e}"
    return SystemRun(
        records=records,
        wall_s=wall,
        load_s=load_s,
        config=config,
        engine_stats=after,
        engine_stats_delta=delta,
        preemptions=delta.get("num_preemptions"),
    )
