"""The bench's llama.cpp peer (its output parsed, its best setting chosen, its ratio) and the floor model's
arithmetic, checked against hand-computed values. The peer's process is a stand-in script here: CI has no
llama.cpp build (scripts/build_llamacpp.sh makes one)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from bench.config import WorkloadSpec
from bench.floor import kv_bytes_per_token, workload_floor
from bench.llamacpp import parse_batched_bench, peer_ggufs, run_peer, uniform_shape
from bench.metrics import request_flops
from bench.results import empty_row
from bench.shapes import SHAPES
from bench.workload import build_workload

TABLE = """
main: n_kv_max = 58560, n_batch = 2048, n_ubatch = 512, flash_attn = 1, is_pp_shared = 0, n_gpu_layers = -1

|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|   754 |    161 |   64 |  58560 |   97.373 |   495.58 |   59.167 |   174.15 |  156.540 |   374.09 |
"""

UNIFORM = WorkloadSpec(num_requests=6, prefix_len=0, body_median=40, body_sigma=0, body_min=8, body_max=64,
                       output_min=7, output_max=7)


def test_parse_batched_bench_table() -> None:
    (row,) = parse_batched_bench(TABLE)
    assert (row.prompt_tokens, row.output_tokens, row.parallel) == (754, 161, 64)
    assert (row.prompt_s, row.generate_s, row.total_s) == (97.373, 59.167, 156.54)
    assert parse_batched_bench("no table here\n| a | b |") == []


def test_uniform_shape_needs_equal_lengths_and_no_shared_prefix() -> None:
    assert uniform_shape(build_workload(UNIFORM, vocab_size=100)) == (40, 7)
    shared = UNIFORM.model_copy(update={"prefix_len": 4})
    assert isinstance(uniform_shape(build_workload(shared, vocab_size=100)), str)
    varied = UNIFORM.model_copy(update={"body_sigma": 0.5})
    assert isinstance(uniform_shape(build_workload(varied, vocab_size=100)), str)


def _fake_batched_bench(bin_dir: Path) -> None:
    """Prints a batched-bench table whose batch of P sequences takes 10 + P seconds (so larger P pays), and
    fails for P = 5 (a setting that does not fit, say)."""
    bin_dir.mkdir()
    script = bin_dir / "llama-batched-bench"
    script.write_text("""#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -npp) pp=$2;; -ntg) tg=$2;; -npl) p=$2;; esac; shift; done
[ "$p" = 5 ] && exit 1
echo "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |"
echo "|   $pp |    $tg |   $p |  1 |   1.0 |   1.0 |   1.0 |   1.0 |  $((10 + p)).0 |   1.0 |"
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_run_peer_keeps_the_best_parallel_setting(tmp_path: Path) -> None:
    _fake_batched_bench(tmp_path / "bin")
    gguf = tmp_path / "m.Q8_0.gguf"
    gguf.write_bytes(b"GGUF")
    wl = build_workload(UNIFORM, vocab_size=100)
    row = run_peer(gguf, wl, threads=2, parallel=(1, 2, 5, 6, 99), bin_dir=tmp_path / "bin",
                   log_path=tmp_path / "log")
    # 6 requests: P=1 -> 6 x 11 s, P=2 -> 3 x 12, P=6 (and 99, capped at 6) -> 1 x 16; P=5 failed
    assert row.status == "ok" and row.name == "llamacpp_q8_0" and row.kind == "peer"
    assert row.config["parallel"] == 6 and row.wall_s == pytest.approx(16.0)
    assert row.config["wall_s_by_parallel"] == {"1": 66.0, "2": 36.0, "6": 16.0}
    assert row.output_tokens == 42 and row.output_tokens_per_s == pytest.approx(42 / 16)
    standard = build_workload(WorkloadSpec(num_requests=4), vocab_size=100)
    assert run_peer(gguf, standard, 2, (4,), tmp_path / "bin", tmp_path / "log").status == "not_available"


def test_peer_needs_weights(tmp_path: Path) -> None:
    assert "needs GGUF" in peer_ggufs(None, (), tmp_path, tmp_path)
    assert "not found" in peer_ggufs(None, (tmp_path / "missing.gguf",), tmp_path, tmp_path)


def test_engine_rows_get_a_ratio_against_the_best_peer() -> None:
    from bench.runner import _ratios

    wl = build_workload(UNIFORM, vocab_size=100)
    rates = {"output_tokens_per_s": 2.0, "total_tokens_per_s": 4.0, "requests_per_s": 0.5}
    q8 = empty_row("llamacpp_q8_0", "ok", "").model_copy(update={"kind": "peer", **rates})
    bf16 = empty_row("llamacpp_bf16", "ok", "").model_copy(
        update={"kind": "peer", **{k: v * 2 for k, v in rates.items()}})
    eng = empty_row("engine_compiled", "ok", "").model_copy(update={k: v * 12 for k, v in rates.items()})
    _ratios([q8, bf16, eng], wl)
    assert eng.ratios["vs_llamacpp"]["output_tokens_per_s"] == pytest.approx(6.0)  # 24 against the faster (bf16: 4)
    assert q8.ratios == {} and bf16.ratios == {}


def test_floor_model_arithmetic() -> None:
    shape = SHAPES["smollm2-135m"]
    wl = build_workload(UNIFORM, vocab_size=shape.vocab_size)
    f = workload_floor(shape, wl, "bfloat16", int8_ops_per_s=4e11, dense_flops_per_s=2e11, read_bytes_per_s=3e10)
    assert f.gemm_flops + f.attention_flops == pytest.approx(sum(request_flops(shape, 40, 7) for _ in range(6)))
    # per request, decode tokens 0..6 read 40..46 keys: 7 * 40 + 21 = 301 token rows
    assert kv_bytes_per_token(shape, "bfloat16") == 2 * 30 * 3 * 64 * 2
    assert f.kv_bytes == pytest.approx(6 * 301 * kv_bytes_per_token(shape, "bfloat16"))
    assert f.weight_bytes == shape.num_params * 7  # every int8 weight once per step, at least 7 steps
    assert f.compute_s == pytest.approx(f.gemm_flops / 4e11 + f.attention_flops / 2e11)
    assert f.wall_s == max(f.compute_s, f.memory_s)


def test_floor_takes_the_faster_gemm_rate_when_int8_is_slower() -> None:
    """On CPUs without VNNI, torch._int_mm runs below the float GEMM rate; a float rung then does its GEMMs faster
    than the int8 peak, so a floor that charged every GEMM at the int8 rate was no lower bound (the quick bench
    smoke found a rung 'below the floor' on such a machine)."""
    shape = SHAPES["smollm2-135m"]
    wl = build_workload(UNIFORM, vocab_size=shape.vocab_size)
    f = workload_floor(shape, wl, "float32", int8_ops_per_s=1e11, dense_flops_per_s=3e11, read_bytes_per_s=3e10)
    assert f.compute_s == pytest.approx(f.gemm_flops / 3e11 + f.attention_flops / 3e11)
