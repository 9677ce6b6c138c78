"""A CPU engine's KV pool sized to a limit on the whole process's resident memory (what vLLM's
`gpu_memory_utilization` is for a GPU): the pool gets what the loaded model, whatever the caller already holds,
the largest engine step (twice: see STEP_RESERVE) and a headroom leave.

The step's working set is measured, not estimated from the model's shapes: attention scratch, the allocator's
rounding and the kernels' own buffers differ by backend. On a small provisional pool the engine runs the two
largest steps its settings allow — `max_num_batched_tokens` prompt tokens as one sequence, and the same budget
spread over `max_num_seqs` sequences that all sample (the widest logits) — and reads the process's peak resident
size (Linux /proc: `clear_refs` resets the peak, `VmHWM` reports it).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import torch

from engine.block_manager import BlockManager
from engine.config import EngineConfig
from engine.core import EngineCore
from engine.cpu_runtime import return_freed_memory
from engine.errors import MemoryLimitError
from engine.kv_pool import allocate_kv_pool, kv_bytes_per_token
from engine.model_runner import ModelRunner
from engine.models.checkpoint import Checkpoint
from engine.models.llama import LlamaModel
from engine.outputs import RequestMetrics
from engine.sampling_params import SamplingParams
from engine.scheduler import WATERMARK, Scheduler
from engine.sequence import Sequence

MiB = 1 << 20
# Left unclaimed under the limit besides one measured step: the caller's own work while requests run (the
# pipeline stages each bucket's rows), outputs and the structured decoder's matchers (HEADROOM), and the heap's
# growth over steps of many shapes, which the tuned allocator keeps (STEP_RESERVE steps' worth). Measured on the
# 600-window job: one step reserved left it 54 MiB above its plan; two steps and 32 MiB left a 3 GB log's run
# 6 MiB above (docs/eval/bank-exports.md).
HEADROOM = 64 * MiB
STEP_RESERVE = 2


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def resident_bytes() -> int:
    return _status_kib("VmRSS") * 1024


def _reset_peak() -> None:
    """From here on VmHWM reports the peak since now (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_bytes() -> int:
    return _status_kib("VmHWM") * 1024


@dataclass(frozen=True)
class MemoryPlan:
    limit: int
    resident: int  # the process after loading, before any step (the caller's own data included)
    step_working_set: int  # the largest measured step's peak above `resident` (STEP_RESERVE of them are kept)
    kv_budget: int

    def describe(self) -> str:
        return (f"memory_limit {self.limit / MiB:.0f} MiB: process {self.resident / MiB:.0f} MiB after loading, "
                f"largest step +{self.step_working_set / MiB:.0f} MiB, KV pool {self.kv_budget / MiB:.0f} MiB")


def _profile_prompts(c: EngineConfig, vocab: int) -> list[list[list[int]]]:
    """The two profile steps' prompts: one chunk-sized prompt, then the budget over max_num_seqs prompts. Random
    ids from a fixed seed, so no prefix is shared (a shared prefix would compute fewer tokens)."""
    assert c.max_model_len is not None
    rng = random.Random(0)
    budget = c.max_num_batched_tokens
    long = min(budget, c.max_model_len - 1)
    n = max(1, min(c.max_num_seqs, budget))
    each = max(1, min(budget // n, c.max_model_len - 1))
    return [[[rng.randrange(vocab) for _ in range(long)]],
            [[rng.randrange(vocab) for _ in range(each)] for _ in range(n)]]


def measure_step_working_set(c: EngineConfig, ckpt: Checkpoint, model: LlamaModel, dtype: torch.dtype,
                             device: torch.device) -> tuple[int, int]:
    """(resident bytes before any step, the largest profile step's peak above it, its KV writes not counted).
    The profile steps run on a provisional pool, freed after; the KV rows they write are subtracted (the real
    pool's are budgeted separately), so the profile's own peak is no higher than a full step of the real run."""
    assert c.max_model_len is not None
    prompts = _profile_prompts(c, ckpt.config.vocab_size)
    bs, quantized = c.block_size, c.kv_cache_dtype == "int8"
    block_bytes = bs * kv_bytes_per_token(ckpt.config, dtype, quantized)
    written = [sum(-(-len(p) // bs) for p in group) for group in prompts]  # blocks each profile step writes
    reserved = max(sum(-(-(len(p) + 1) // bs) for p in group) for group in prompts)
    return_freed_memory(collect=False)
    pool = allocate_kv_pool(ckpt.config, dtype, device, bs, (int(reserved / (1 - WATERMARK)) + 2) * block_bytes,
                            quantized)
    runner = ModelRunner(model, pool, dtype=dtype, device=device, max_model_len=c.max_model_len,
                         decode_layout=model.k.decode_layout)
    params = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
    resident = resident_bytes()
    worst = touched = 0
    for group, blocks in zip(prompts, written):
        # a fresh block manager per step: both write blocks 1.., so the pages they touch overlap
        bm = BlockManager(pool.num_blocks, bs, enable_prefix_caching=False)
        core = EngineCore(Scheduler(bm, c.max_num_seqs, c.max_num_batched_tokens), bm, runner, ckpt.tokenizer,
                          [], c.max_model_len)
        now = time.perf_counter()
        for i, ids in enumerate(group):
            core.add(Sequence(index=i, prompt_ids=ids, params=params, metrics=RequestMetrics(arrival_time=now)))
        _reset_peak()
        while core.has_unfinished():
            core.step()
        touched = max(touched, blocks * block_bytes)
        worst = max(worst, _peak_bytes() - resident - touched)
    runner.close()
    del runner, pool, core, bm
    return resident, worst


def plan_kv_within_limit(c: EngineConfig, ckpt: Checkpoint, model: LlamaModel, dtype: torch.dtype,
                         device: torch.device, cap: int) -> MemoryPlan:
    """The KV budget under `c.memory_limit` (never more than `cap`, the default budget); MemoryLimitError when the
    process and its steps alone already reach the limit."""
    assert c.memory_limit is not None
    resident, step = measure_step_working_set(c, ckpt, model, dtype, device)
    return_freed_memory(collect=False)  # the provisional pool and the profile's buffers, before the real pool
    room = c.memory_limit - resident - STEP_RESERVE * step - HEADROOM
    block_bytes = c.block_size * kv_bytes_per_token(ckpt.config, dtype, c.kv_cache_dtype == "int8")
    if room < block_bytes:
        raise MemoryLimitError(
            f"memory_limit={c.memory_limit / MiB:.0f} MiB leaves no room for the KV cache: this process holds "
            f"{resident / MiB:.0f} MiB after loading the model and its steps need {STEP_RESERVE} x "
            f"{step / MiB:.0f} MiB more; raise memory_limit or lower max_num_batched_tokens")
    return MemoryPlan(limit=c.memory_limit, resident=resident, step_working_set=step, kv_budget=min(room, cap))
