"""`pipeline bench`: workload determinism, the FLOPs/percentile arithmetic, and the --quick smoke run (no timing asserts)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.config import WorkloadSpec, expand_systems
from bench.metrics import agreement, percentile, request_flops
from bench.shapes import SHAPES, ModelShape, build_checkpoint
from bench.workload import build_workload

ROW_KEYS = {
    "name", "label", "kind", "status", "reason", "wall_s", "requests_per_s", "output_tokens_per_s", "total_tokens_per_s",
    "ttft_ms", "tpot_ms", "e2e_ms", "prefix_cache_hit_rate", "preemptions", "peak_rss_bytes", "mfu", "ratios",
}
EXPECTED_SYSTEMS = [
    "hf_generate_b4", "hf_continuous_batching", "llamacpp", "engine_paged", "engine_prefix_cache", "engine_int8",
    "engine_compiled", "engine_kv_int8", "engine_speculative",
]


def test_standard_workload_matches_the_guide_and_is_deterministic() -> None:
    spec = WorkloadSpec()
    reserved = frozenset({0, 1, 2})
    wl = build_workload(spec, 49152, reserved)
    assert len(wl.requests) == 64
    prefix = wl.requests[0].prompt_token_ids[:256]
    for r in wl.requests:
        assert r.prompt_token_ids[:256] == prefix
        assert 64 <= len(r.prompt_token_ids) - 256 <= 2048
        assert 32 <= r.output_len <= 256
        assert not reserved.intersection(r.prompt_token_ids)
        assert all(0 <= t < 49152 for t in r.prompt_token_ids)
    bodies = sorted(len(r.prompt_token_ids) - 256 for r in wl.requests)
    assert 300 < bodies[32] < 800  # lognormal with median 500
    assert build_workload(spec, 49152, reserved).fingerprint() == wl.fingerprint()
    assert build_workload(WorkloadSpec(seed=1), 49152, reserved).fingerprint() != wl.fingerprint()


def test_workload_rejects_inverted_ranges() -> None:
    with pytest.raises(ValueError, match="output_min"):
        WorkloadSpec(output_min=10, output_max=5)


def test_system_selection() -> None:
    assert expand_systems("engine_int8,hf") == ("hf_generate_b4", "hf_continuous_batching", "engine_int8")
    assert list(expand_systems("all")) == EXPECTED_SYSTEMS
    with pytest.raises(ValueError, match="unknown system"):
        expand_systems("vllm")


def test_percentile_and_agreement() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 99) == pytest.approx(4.96)
    assert percentile([7.0], 95) == 7.0
    a = agreement([[1, 2, 3, 4], [5, 6]], [[1, 2, 9, 4], [6, 6]])
    assert a["first_token_match"] == 0.5
    assert a["mean_matching_prefix"] == pytest.approx((2 / 4 + 0) / 2)


def test_flops_count_by_hand() -> None:
    s = ModelShape("t", "llama", hidden_size=8, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=16,
                   vocab_size=10, head_dim=4, tie_word_embeddings=True)
    # per layer weights: q 8*8 + k,v 2*8*4 + o 8*8 + mlp 3*8*16 = 576; prompt 3 + output 2 -> 4 tokens through stack
    linear = 2 * 2 * 576 * 4
    attn = 2 * 4 * 2 * 4 * (4 * 5 / 2)  # layers * 4 * heads * head_dim * causal pairs
    lm_head = 2 * 8 * 10 * 2
    assert request_flops(s, 3, 2) == pytest.approx(linear + attn + lm_head)


@pytest.mark.parametrize("name", ["tiny-llama"])
def test_shape_checkpoint_matches_its_declared_size(tmp_path: Path, name: str) -> None:
    import transformers

    shape = SHAPES[name]
    path = build_checkpoint(shape, tmp_path, seed=0, dtype="float32")
    model = transformers.AutoModelForCausalLM.from_pretrained(path)
    assert sum(p.numel() for p in model.parameters()) == shape.num_params
    assert build_checkpoint(shape, tmp_path, seed=0, dtype="float32") == path  # cached, not rebuilt
    assert (path / "tokenizer.json").exists()


def test_register_adds_bench_subcommand() -> None:
    from bench.cli import config_from_args, register

    parser = argparse.ArgumentParser(prog="pipeline")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", "--quick", "--num-requests", "3", "--systems", "hf"])
    cfg = config_from_args(args)
    assert callable(args.func)
    assert cfg.model == "tiny-llama" and cfg.workload.num_requests == 3 and cfg.preset == "custom"
    assert cfg.systems == ("hf_generate_b4", "hf_continuous_batching")
    std = config_from_args(parser.parse_args(["bench"]))
    assert std.preset == "standard" and std.workload == WorkloadSpec() and std.model == "smollm2-135m"


def _png(path: Path) -> bool:
    return path.exists() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("fast_bf16", [False, True])
def test_the_default_dtype_is_the_engines_auto_rule(monkeypatch: pytest.MonkeyPatch, fast_bf16: bool) -> None:
    # A CPU without bf16 instructions runs a bf16 GEMM at ~1 GFLOP/s: a first `pipeline bench` there ran for hours.
    import engine.devices
    from bench.cli import add_arguments, config_from_args

    monkeypatch.setattr(engine.devices, "cpu_has_fast_bf16", lambda: fast_bf16)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cfg = config_from_args(parser.parse_args(["--device", "cpu"]))
    assert cfg.dtype == ("bfloat16" if fast_bf16 else "float32")
    assert cfg.preset == "standard"  # the standard workload is defined in either dtype
    assert config_from_args(parser.parse_args(["--device", "cpu", "--dtype", "bfloat16"])).dtype == "bfloat16"
    assert config_from_args(parser.parse_args(["--device", "cpu", "--dtype", "float16"])).preset == "custom"


def test_int8_peak_shrinks_a_slow_torch_int_mm_instead_of_timing_it_at_full_size(monkeypatch) -> None:
    """torch._int_mm runs at ~2 GOPS on AVX2-only CPUs (no VNNI path): nine 2048^3 products took ~100 s of every
    `pipeline bench`. Like a slow bf16 GEMM, it is measured at the size where one product takes under a second."""
    import torch

    from bench import machine

    clock, sizes = [0.0], []

    def int_mm_at_2_gops(a: torch.Tensor, b: torch.Tensor) -> None:  # advances a fake clock instead of waiting
        sizes.append(a.shape[0])
        clock[0] += 2.0 * a.shape[0] ** 3 / 2e9

    monkeypatch.setattr(machine.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(machine, "_product", lambda dtype: int_mm_at_2_gops)
    monkeypatch.setattr(machine, "_square_operands", lambda n, device, dtype: (torch.empty(n, 0), torch.empty(0, n)))
    monkeypatch.setattr("kernels.dispatch.get_kernels", lambda device: type("K", (), {"int8_linear": None})())
    peak = machine.measure_int8_peak("cpu")
    assert sizes.count(2048) == 1  # the one product that shows it is slow
    assert peak["m"] < 2048 and peak["flops_per_s"] == pytest.approx(2e9)


def test_quick_smoke_writes_json_and_charts(tmp_path: Path) -> None:
    from bench.cli import main

    out = tmp_path / "quick"
    # The default dtype is float32 on CPUs without bf16 instructions (a bf16 GEMM there runs at ~1 GFLOP/s).
    rc = main(["--quick", "--out", str(out), "--cache-dir", str(tmp_path / "shapes")])
    results = json.loads((out / "results.json").read_text())
    errors = {r["name"]: r["reason"] for r in results["systems"] if r["status"] == "error"}
    assert rc == 0, f"systems errored: {errors}"
    for key in ("machine", "gemm_peak", "model", "workload", "systems", "headline", "charts", "mfu_definition"):
        assert key in results
    assert results["gemm_peak"]["flops_per_s"] > 0
    assert [r["name"] for r in results["systems"]] == EXPECTED_SYSTEMS
    rows = {r["name"]: r for r in results["systems"]}
    for r in rows.values():
        assert ROW_KEYS <= set(r)
    for name in ("hf_generate_b4", "hf_continuous_batching", "engine_paged", "engine_prefix_cache"):
        r = rows[name]
        assert r["status"] == "ok", (name, r["reason"])
        assert r["output_tokens"] == results["workload"]["total_output_tokens"]
        assert r["prompt_tokens"] == results["workload"]["total_prompt_tokens"]
        assert r["mfu"] > 0 and r["peak_rss_bytes"] > 0
        assert {"p50", "p95", "p99"} <= set(r["ttft_ms"])
    assert rows["engine_int8"]["status"] in ("ok", "skipped")
    assert rows["engine_paged"]["prefix_cache_hit_rate"] == 0.0
    assert rows["engine_prefix_cache"]["prefix_cache_hit_rate"] > 0.0  # the 32-token shared prefix is reused
    assert "vs_hf_generate_b4" in rows["engine_paged"]["ratios"]
    assert "vs_hf_continuous_batching" in rows["engine_paged"]["ratios"]
    assert rows["engine_compiled"]["status"] in ("ok", "skipped")  # int8 + the compiled kernels
    assert rows["engine_paged"]["config"]["engine_config"]["kernels"] == "torch-reference"
    assert "cpu-native" in rows["engine_compiled"]["config"]["engine_config"]["kernels"]
    assert rows["engine_kv_int8"]["status"] == "ok", rows["engine_kv_int8"]["reason"]
    assert rows["engine_kv_int8"]["config"]["engine_config"]["kv_cache_dtype"] == "int8"
    spec = rows["engine_speculative"]
    assert spec["status"] == "ok", spec["reason"]
    assert spec["config"]["engine_config"]["speculative_config"]["method"] == "ngram"
    sp = spec["speculative"]
    assert sp["identical_outputs_vs"] == "engine_kv_int8" and sp["identical_outputs_share"] == 1.0
    assert sp["baseline"] in rows and sp["steps"] > 0 and sp["baseline_steps"] > 0
    assert sp["draft_tokens"] == spec["engine_stats_delta"]["spec_draft_tokens"]
    assert results["headline"]["best_engine_step"] in rows
    assert rows["llamacpp"]["status"] == "not_available" and rows["llamacpp"]["kind"] == "peer"  # no GGUF here
    assert results["floor"]["wall_s"] > 0 and results["floor"]["int8_gemm_peak"]["flops_per_s"] > 0
    assert all(r["floor_ratio"] > 1.0 for r in rows.values() if r["status"] == "ok")  # nothing beats the floor
    assert all(_png(out / name) for name in ("throughput.png", "latency.png"))
    assert "| system |" in (out / "results.md").read_text()

    # Re-measure one ladder step against the same baselines without re-running them.
    out2 = tmp_path / "reuse"
    rc2 = main(["--quick", "--systems", "hf,engine_paged", "--reuse-baselines", str(out / "results.json"),
                "--out", str(out2), "--cache-dir", str(tmp_path / "shapes")])
    assert rc2 == 0
    again = {r["name"]: r for r in json.loads((out2 / "results.json").read_text())["systems"]}
    assert again["hf_generate_b4"]["reused_from"] and again["hf_generate_b4"]["wall_s"] == rows["hf_generate_b4"]["wall_s"]
    assert again["engine_paged"]["reused_from"] is None and "vs_hf_generate_b4" in again["engine_paged"]["ratios"]

    # Baselines of a different workload are refused rather than silently compared.
    rc3 = main(["--quick", "--seed", "1", "--systems", "hf", "--reuse-baselines", str(out / "results.json"),
                "--out", str(tmp_path / "bad"), "--cache-dir", str(tmp_path / "shapes")])
    assert rc3 == 2


def test_ratios_against_a_stopped_baseline_are_lower_bounds() -> None:
    from bench.results import empty_row
    from bench.runner import _ratios

    wl = build_workload(WorkloadSpec(num_requests=4, prefix_len=4, body_median=10, body_min=8, body_max=16,
                                     output_min=10, output_max=10), vocab_size=100)
    b4 = empty_row("hf_generate_b4", "ok", "").model_copy(
        update={"output_tokens_per_s": 2.0, "total_tokens_per_s": 10.0, "requests_per_s": 0.1})
    cb = empty_row("hf_continuous_batching", "timeout", "stopped").model_copy(update={"wall_s": 20.0})
    eng = empty_row("engine_paged", "ok", "").model_copy(
        update={"output_tokens_per_s": 8.0, "total_tokens_per_s": 40.0, "requests_per_s": 0.4})
    _ratios([b4, cb, eng], wl)
    assert eng.ratios == {"vs_hf_generate_b4": {"output_tokens_per_s": 4.0, "total_tokens_per_s": 4.0,
                                                "requests_per_s": 4.0}}
    # 40 output tokens were not done in 20 s, so the stopped baseline ran below 2 tok/s: the engine is >= 4x.
    assert eng.ratios_at_least["vs_hf_continuous_batching"]["output_tokens_per_s"] == pytest.approx(4.0)
    assert eng.ratios_at_least["vs_hf_continuous_batching"]["requests_per_s"] == pytest.approx(0.4 / (4 / 20))
    assert cb.ratios == {} and cb.ratios_at_least == {}


def test_system_timeout_stops_the_worker(tmp_path: Path) -> None:
    from bench.config import BenchJob, EngineOptions, HFOptions
    from bench.runner import _run_worker

    job = BenchJob(system="hf_generate_b4", model_dir=tmp_path, shape={}, dtype="float32", device="cpu", threads=1,
                   workload=WorkloadSpec(), workload_fingerprint="x", reserved_ids=[], engine=EngineOptions(),
                   hf=HFOptions(), warmup=False, gemm_flops_per_s=None)
    row, toks = _run_worker(job, tmp_path / "log.txt", timeout_s=0.2)
    assert (row.status, row.wall_s, toks) == ("timeout", 0.2, [])
    assert "--system-timeout" in row.reason
