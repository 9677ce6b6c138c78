"""Engine behaviour beyond parity: paging, seeded sampling, stops, streaming, bad input."""

from __future__ import annotations

import json
import shutil

import pytest

from engine import LLM, ModelLoadError, SamplingParams

KV_BYTES_PER_TOKEN = 2 * 2 * 2 * 16 * 4  # K+V, 2 layers, 2 KV heads, head_dim 16, float32 (llama fixture)


@pytest.fixture(scope="module")
def llm(checkpoints):
    return LLM(checkpoints["llama"], dtype="float32", block_size=8)


def test_paging_serves_more_sequences_than_contiguous_reservation(checkpoints):
    max_len = 128
    # Exactly two max_model_len sequences' worth of KV: a contiguous cache would run two requests at a time.
    llm = LLM(checkpoints["llama"], dtype="float32", block_size=8, max_model_len=max_len,
              kv_cache_memory=2 * max_len * KV_BYTES_PER_TOKEN)
    assert llm.stats()["kv_blocks_total"] == 2 * max_len // 8
    prompts = [[0] + [10 + i] * 9 for i in range(8)]
    outs = llm.generate(prompts, SamplingParams(max_tokens=6, min_tokens=6, ignore_eos=True), progress=False)
    stats = llm.stats()
    assert all(len(o.outputs[0].token_ids) == 6 for o in outs)
    assert stats["peak_running_seqs"] == 8 > 2
    assert stats["num_preemptions"] == 0
    assert 0 < stats["kv_blocks_peak_used"] <= stats["kv_blocks_total"]
    assert stats["kv_blocks_used"] == 0  # every block went back to the pool


def test_seeded_sampling_independent_of_batch(llm):
    target = [0, 5, 6, 7, 8, 9]
    p = SamplingParams(max_tokens=12, temperature=0.9, top_k=50, top_p=0.95, seed=1234, ignore_eos=True)
    alone = llm.generate([target], p, progress=False)[0].outputs[0].token_ids
    others = [[0, 40, 41], [0] + list(range(50, 80)), [0, 99]]
    params = [SamplingParams(max_tokens=20, temperature=1.0, seed=7, ignore_eos=True),
              SamplingParams(max_tokens=5), p, SamplingParams(max_tokens=9, temperature=0.5, ignore_eos=True)]
    mixed = llm.generate([others[0], others[1], target, others[2]], params, progress=False)
    assert mixed[2].outputs[0].token_ids == alone
    different = llm.generate([target], SamplingParams(max_tokens=12, temperature=0.9, seed=99, ignore_eos=True),
                             progress=False)[0].outputs[0].token_ids
    assert different != alone


def test_min_tokens_and_length(llm):
    out = llm.generate([[0, 3, 4]], SamplingParams(max_tokens=7, min_tokens=7, ignore_eos=True), progress=False)[0]
    assert len(out.outputs[0].token_ids) == 7 and out.outputs[0].finish_reason == "length"
    assert out.metrics.num_output_tokens == 7 and out.metrics.ttft is not None and out.metrics.tpot is not None


def test_stop_string_truncates_text(llm):
    prompt = "Invoice total"
    full = llm.generate([prompt], SamplingParams(max_tokens=24, ignore_eos=True), progress=False)[0]
    assert len(full.outputs[0].text) > 6
    stop = full.outputs[0].text[3:6]
    out = llm.generate([prompt], SamplingParams(max_tokens=24, ignore_eos=True, stop=[stop]), progress=False)[0]
    assert out.outputs[0].finish_reason == "stop"
    assert stop not in out.outputs[0].text and full.outputs[0].text.startswith(out.outputs[0].text)


def test_stop_token_ids(llm):
    full = llm.generate([[0, 11, 12]], SamplingParams(max_tokens=10, ignore_eos=True), progress=False)[0]
    stop_tok = full.outputs[0].token_ids[3]
    out = llm.generate([[0, 11, 12]], SamplingParams(max_tokens=10, ignore_eos=True, stop_token_ids=[stop_tok]),
                       progress=False)[0]
    assert out.outputs[0].finish_reason == "stop" and out.outputs[0].token_ids[-1] == stop_tok
    assert out.outputs[0].token_ids == full.outputs[0].token_ids[: full.outputs[0].token_ids.index(stop_tok) + 1]


def test_streaming_yields_every_request_once(llm):
    prompts = [[0] + [20 + i] * (i + 1) for i in range(6)]
    seen = [o.index for o in llm.generate_stream(prompts, SamplingParams(max_tokens=3 + 0), progress=False)]
    assert sorted(seen) == list(range(6))


def test_string_prompts_use_tokenizer(llm):
    out = llm.generate(["Trade confirmation"], SamplingParams(max_tokens=4), progress=False)[0]
    assert out.prompt_token_ids == llm.tokenizer.encode("Trade confirmation")
    assert out.prompt_token_ids[0] == 0  # BOS from the tokenizer's post-processor


def test_request_that_never_fits_fails_alone(checkpoints):
    llm = LLM(checkpoints["llama"], dtype="float32", block_size=8, max_model_len=64,
              kv_cache_memory=4 * 8 * KV_BYTES_PER_TOKEN)
    prompts = [[0, 5, 6], [0] + [7] * 70, [0] + [8] * 40, [0, 9]]
    outs = llm.generate(prompts, SamplingParams(max_tokens=4, ignore_eos=True), progress=False)
    assert outs[1].outputs[0].finish_reason == "error" and "max_model_len" in outs[1].error
    assert outs[2].outputs[0].finish_reason == "error" and "cache" in outs[2].error
    assert [len(o.outputs[0].token_ids) for i, o in enumerate(outs) if i in (0, 3)] == [4, 4]


@pytest.mark.parametrize(
    "prompts, match",
    [([], "empty"), ([""], "empty"), ([[]], "empty"), ([[0, 10_000]], "outside the vocabulary"), ([[0, -1]], "outside")],
)
def test_bad_prompts_raise(llm, prompts, match):
    with pytest.raises(ValueError, match=match):
        llm.generate(prompts, SamplingParams(max_tokens=2), progress=False)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"max_tokens": 0}, "max_tokens"), ({"temperature": -1}, "temperature"), ({"top_p": 0}, "top_p"),
     ({"top_k": -5}, "top_k"), ({"min_tokens": 5, "max_tokens": 2}, "min_tokens"), ({"stop": [""]}, "stop")],
)
def test_bad_sampling_params_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SamplingParams(**kwargs)


def test_missing_model_dir(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        LLM(tmp_path / "nope")


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_unknown_architecture(checkpoints, tmp_path):
    d = _copy(checkpoints["llama"], tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    cfg["architectures"] = ["GPT2LMHeadModel"]
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="unsupported architecture.*GPT2LMHeadModel"):
        LLM(d)


def test_weight_shape_mismatch(checkpoints, tmp_path):
    d = _copy(checkpoints["llama"], tmp_path / "m")
    cfg = json.loads((d / "config.json").read_text())
    cfg["intermediate_size"] = 96
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match=r"mlp\.gate_proj\.weight.*shape"):
        LLM(d)


@pytest.mark.parametrize("missing", ["config.json", "model.safetensors", "tokenizer.json"])
def test_missing_files(checkpoints, tmp_path, missing):
    d = _copy(checkpoints["llama"], tmp_path / "m")
    (d / missing).unlink()
    with pytest.raises(ModelLoadError, match=missing.split(".")[0]):
        LLM(d)


def test_missing_shard(checkpoints, tmp_path):
    d = _copy(checkpoints["mistral"], tmp_path / "m")
    next(d.glob("model-00002-*.safetensors")).unlink()
    with pytest.raises(ModelLoadError, match="shard"):
        LLM(d)


def test_config_summary_reports_cpu_allocator_tuning(llm):
    summary = llm.config_summary()
    assert isinstance(summary["cpu_allocator_tuned"], bool)
    assert summary["cpu_allocator_tuned"] is False or summary["device"] == "cpu"


def test_kernels_switch_selects_the_plain_torch_kernels(checkpoints, llm):
    """kernels="reference" (the bench ladder's rung below the compiled kernels) runs the torch ops only and, in
    float32, generates the same greedy tokens as the default kernels."""
    ref = LLM(checkpoints["llama"], dtype="float32", block_size=8, kernels="reference")
    assert ref.config_summary()["kernels"] == "torch-reference"
    prompts = [[0] + list(range(5, 5 + n)) for n in (3, 11, 20)]
    params = SamplingParams(max_tokens=8, min_tokens=8, ignore_eos=True)
    got = [o.outputs[0].token_ids for o in ref.generate(prompts, params, progress=False)]
    assert got == [o.outputs[0].token_ids for o in llm.generate(prompts, params, progress=False)]
    with pytest.raises(ValueError, match="kernels"):
        LLM(checkpoints["llama"], dtype="float32", kernels="fast")


@pytest.mark.parametrize("fast_bf16,expected", [(True, "bfloat16"), (False, "float32")])
def test_auto_dtype_keeps_bf16_only_where_the_cpu_has_it(checkpoints, tmp_path, monkeypatch, fast_bf16, expected):
    """A bf16 checkpoint on a CPU without bf16 instructions would run its GEMMs ~100x slower than float32."""
    import json
    import shutil

    import engine.devices as devices_module

    model = tmp_path / "bf16"
    shutil.copytree(checkpoints["llama"], model)
    cfg = json.loads((model / "config.json").read_text())
    cfg["torch_dtype"] = "bfloat16"
    cfg.pop("dtype", None)
    (model / "config.json").write_text(json.dumps(cfg))
    monkeypatch.setattr(devices_module, "cpu_has_fast_bf16", lambda: fast_bf16)
    assert LLM(model, device="cpu").config_summary()["dtype"] == expected


def test_stream_reads_requests_as_the_engine_has_room_and_gives_generates_outputs(checkpoints):
    """`LLM.stream` takes requests from an iterable only while fewer than `lookahead` wait, so a caller's groups
    of requests flow through one continuous batch; greedy outputs equal `generate`'s."""
    llm = LLM(checkpoints["llama"], dtype="float32", block_size=8, max_num_seqs=2)
    prompts = [[0] + [10 + i] * (3 + i % 4) for i in range(7)]
    params = [SamplingParams(max_tokens=4 + i % 3, min_tokens=4 + i % 3, ignore_eos=True) for i in range(7)]
    want = [o.outputs[0].token_ids for o in llm.generate(prompts, params, progress=False)]
    read: list[int] = []

    def requests():
        for i, (prompt, p) in enumerate(zip(prompts, params)):
            read.append(i)
            yield prompt, p

    got: dict[int, list[int]] = {}
    for out in llm.stream(requests(), lookahead=1):
        got[out.index] = out.outputs[0].token_ids
        # never more read than running (two) plus waiting (one) plus those already finished
        assert len(read) <= len(got) + 2 + 1
    assert [got[i] for i in range(7)] == want
    assert llm.stats()["kv_blocks_used"] == 0
    # a request the engine cannot run fails alone, as in generate
    bad = [([0] * (llm.max_model_len + 1), params[0]), (prompts[0], params[0])]
    outs = sorted(llm.stream(iter(bad)), key=lambda o: o.index)
    assert outs[0].outputs[0].finish_reason == "error" and outs[1].outputs[0].token_ids == want[0]


@pytest.mark.parametrize("avx512_bf16,amx,expected", [(False, False, False), (True, False, True), (False, True, True)])
def test_fast_bf16_means_the_cpus_own_bf16_instructions(monkeypatch, avx512_bf16, amx, expected):
    """oneDNN reports bf16 as supported on any AVX-512 CPU, where it converts in software and a bf16 GEMM runs at
    a quarter of float32's speed (an AVX-512 VNNI Xeon without AVX512-BF16 or AMX): only the instructions count."""
    import torch

    import engine.devices as devices_module

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    assert devices_module.cpu_has_fast_bf16() is expected
