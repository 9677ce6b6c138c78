"""`memory_limit`: a CPU engine sizes its KV pool to what a limit on the whole process's resident memory leaves
after the model and one measured full step, so a run's peak stays under the limit (issue 39's bounded-memory
job); and loading does not raise the peak with transients the tuned allocator would keep."""

from __future__ import annotations

import sys

import pytest
from pydantic import ValidationError

import engine.build as build_module
from engine import LLM, MemoryLimitError, SamplingParams
from engine.config import MEMORY_LIMIT_STEP_TOKENS, EngineSettings
from engine.memory_budget import resident_bytes
from tests.helpers.checkpoints import make_checkpoint

MiB = 1 << 20

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")


@pytest.fixture(scope="module")
def wide_kv_model(tmp_path_factory: pytest.TempPathFactory):
    """Small weights, wide KV rows (4 layers x 4 KV heads x 64): a few hundred requests' KV is tens of MiB, far
    more than the model, so the KV pool is what a limit has to bound."""
    return make_checkpoint(tmp_path_factory.mktemp("wide") / "m", "llama", hidden_size=256, num_layers=4,
                           intermediate_size=256, max_position_embeddings=512,
                           overrides={"num_attention_heads": 4, "num_key_value_heads": 4})


def _peak_since_reset() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) * 1024


def _prompts(n: int) -> list[list[int]]:
    return [[0] + [(7 * i + j) % 300 + 2 for j in range(150)] for i in range(n)]


def test_the_kv_pool_fits_under_the_limit_and_the_run_stays_under_it(wide_kv_model):
    params = SamplingParams(max_tokens=40, min_tokens=40, ignore_eos=True)
    unlimited = LLM(wide_kv_model, dtype="float32", max_num_seqs=64, max_num_batched_tokens=256)
    want = [o.outputs[0].token_ids for o in unlimited.generate(_prompts(96), params, progress=False)]
    default_pool = unlimited.kv_cache_bytes
    unlimited.close()
    del unlimited
    build_module.return_freed_memory()

    limit = resident_bytes() + 128 * MiB
    llm = LLM(wide_kv_model, dtype="float32", max_num_seqs=64, max_num_batched_tokens=256, memory_limit=limit)
    # the limit binds: 64 requests in flight hold 64 x 191 tokens of 8 KiB (4 layers x K, V x 4 heads x 64 x 4 B)
    assert 0 < llm.kv_cache_bytes < 64 * 191 * 8192 < default_pool
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    got = [o.outputs[0].token_ids for o in llm.generate(_prompts(96), params, progress=False)]
    assert _peak_since_reset() <= limit
    assert got == want  # fewer requests in flight, the same tokens


def test_a_limit_the_model_alone_exceeds_says_so(wide_kv_model):
    with pytest.raises(MemoryLimitError, match="memory_limit=.*leaves no room for the KV cache"):
        LLM(wide_kv_model, dtype="float32", memory_limit=resident_bytes() // 2)


def test_pipeline_run_says_in_one_line_that_the_limit_is_too_low(wide_kv_model, tmp_path, capsys):
    from pipeline.cli import main

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "log.csv").write_text("date,account,amount,currency,counterparty,description\n"
                                             "2025-01-02,ACC1,-12.50,EUR,Coffee Corner,coffee\n")
    rc = main(["run", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--no-progress",
               "--model", str(wide_kv_model), "--dtype", "float32", "--memory-limit", "64M"])
    out = capsys.readouterr().out
    assert rc == 2 and "memory limit too low:" in out and "Traceback" not in out


def test_memory_limit_and_kv_cache_memory_are_one_choice(wide_kv_model):
    with pytest.raises(ValidationError, match="memory_limit or kv_cache_memory"):
        LLM(wide_kv_model, memory_limit=1 << 30, kv_cache_memory=1 << 28)


def test_the_pipeline_run_flag_reaches_the_engine_options():
    import argparse

    from pipeline.config import add_engine_group, engine_options

    parser = argparse.ArgumentParser()
    add_engine_group(parser)
    args = parser.parse_args(["--memory-limit", "1.5G"])
    assert engine_options(args)["memory_limit"] == int(1.5 * (1 << 30))


def test_a_memory_limit_alone_gives_steps_the_budget_that_leaves_the_kv_pool_room():
    """A step's working set grows with its token budget and the limit reserves two of them: at the 2,048-token
    default a tight limit left the KV pool far fewer blocks than 512-token steps do, so the limit alone now picks
    the smaller steps; a budget the caller gives still wins (docs/eval/bank-exports.md)."""
    assert EngineSettings().max_num_batched_tokens == 2048
    assert EngineSettings(memory_limit=1 << 30).max_num_batched_tokens == MEMORY_LIMIT_STEP_TOKENS
    assert EngineSettings(memory_limit=1 << 30, max_num_batched_tokens=2048).max_num_batched_tokens == 2048
    assert EngineSettings(kv_cache_memory=1 << 28).max_num_batched_tokens == 2048


def test_the_allocator_is_tuned_only_after_the_weights_are_built(wide_kv_model, monkeypatch):
    """Tuned first, every transient of loading (dequantised copies, fused projections, merged adapter deltas)
    stayed in the heap until the end of the build and raised the process's peak by that much."""
    calls: list[str] = []
    real_build, real_keep = build_module.build_model, build_module.keep_freed_memory

    def build_model(*a, **k):
        calls.append("build_model")
        return real_build(*a, **k)

    def keep_freed_memory():
        calls.append("keep_freed_memory")
        return real_keep()

    monkeypatch.setattr(build_module, "build_model", build_model)
    monkeypatch.setattr(build_module, "keep_freed_memory", keep_freed_memory)
    LLM(wide_kv_model, dtype="float32", device="cpu").close()
    assert calls and calls[0] == "build_model"
