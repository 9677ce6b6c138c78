"""INT8 weights: quantization maths, the integer GEMM, Int8Linear, quantize_model, pre-quantized checkpoints."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors import safe_open

from engine import LLM, SamplingParams, quantize_checkpoint
from engine.errors import ModelLoadError
from engine.models.layers import Linear
from engine.models.weights import checkpoint_quantization
from engine.quantization import Int8Linear, linear_weight_bytes, quantize_model
from kernels import get_kernels
from kernels.reference.int8_gemm import (
    dequantize_weight,
    int8_mm,
    quantize_activation,
    quantize_weight,
    w8a8_linear,
    weight_only_linear,
)


def _int64_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The integer reference: exact int64 xq @ wq.T."""
    return a.to(torch.int64) @ b.to(torch.int64).t()


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


# ---------------------------------------------------------------------------------------------------------- maths
def test_weight_round_trip_error_is_at_most_half_a_step() -> None:
    g = torch.Generator().manual_seed(0)
    w = torch.randn(48, 96, generator=g) * torch.logspace(-3, 1, 48)[:, None]  # rows of very different ranges
    w[5] = 0.0  # an all-zero output channel must not produce NaN/inf
    q, s = quantize_weight(w)
    assert q.dtype == torch.int8 and s.dtype == torch.float32 and s.shape == (48,)
    assert int(q.abs().max()) == 127 and int(q.min()) >= -127
    assert torch.all(q[5] == 0) and torch.isfinite(s).all()
    err = (dequantize_weight(q, s) - w).abs()
    assert torch.all(err <= s[:, None] / 2 + 1e-7 * w.abs())
    # Every non-zero row uses the full int8 range: its largest magnitude maps to +-127.
    assert torch.all(q.abs().amax(1)[torch.arange(48) != 5] == 127)


def test_activation_quantization_is_per_token() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(7, 33, generator=g)
    x[2] *= 1000.0  # one loud token must not flatten the others' resolution
    x[4] = 0.0
    q, s = quantize_activation(x)
    assert q.dtype == torch.int8 and s.shape == (7, 1)
    assert torch.all(q[4] == 0)
    assert torch.all(q.abs().amax(1)[torch.tensor([0, 1, 2, 3, 5, 6])] == 127)
    assert torch.all((q.float() * s - x).abs() <= s / 2 + 1e-6 * x.abs())
    x_before = x.clone()
    quantize_activation(x)
    assert torch.equal(x, x_before), "quantize_activation must not modify its input"


@pytest.mark.parametrize("m,k,n", [(1, 64, 96), (5, 7, 3), (17, 576, 96), (64, 1536, 40)])
def test_int8_mm_is_exact_against_int64_reference(m: int, k: int, n: int) -> None:
    g = torch.Generator().manual_seed(m * 1000 + k)
    a = torch.randint(-127, 128, (m, k), dtype=torch.int8, generator=g)
    b = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g)
    y = int8_mm(a, b)
    assert y.dtype == torch.int32
    assert torch.equal(y.to(torch.int64), _int64_mm(a, b))


def test_int8_mm_extreme_values_do_not_saturate() -> None:
    # All products +-127*127 with one sign: the largest int32 sums a K=1536 layer can produce. A GEMM that
    # pairs u8*s8 products in int16 (pre-VNNI x86) would saturate here.
    a = torch.full((3, 1536), 127, dtype=torch.int8)
    a[1] = -127
    b = torch.full((4, 1536), 127, dtype=torch.int8)
    b[2, ::2] = -127
    assert torch.equal(int8_mm(a, b).to(torch.int64), _int64_mm(a, b))


def test_w8a8_linear_matches_integer_reference_and_float() -> None:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(9, 128, generator=g)
    w = torch.randn(80, 128, generator=g) * 0.05
    bias = torch.randn(80, generator=g)
    q, s = quantize_weight(w)
    xq, xs = quantize_activation(x)
    expect = _int64_mm(xq, q).to(torch.float64) * xs.double() * s.double() + bias.double()
    y = w8a8_linear(x, q, s, bias)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y.double(), expect, rtol=1e-6, atol=1e-6)
    assert _rel_err(y, F.linear(x, w, bias)) < 0.02
    yb = w8a8_linear(x.bfloat16(), q, s, bias.bfloat16())
    assert yb.dtype == torch.bfloat16 and _rel_err(yb, F.linear(x, w, bias)) < 0.03


def test_w8a8_linear_is_batch_invariant() -> None:
    """Per-token scales + exact integer sums: a row's result does not depend on the rest of the batch."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(300, 96, generator=g).bfloat16()  # > ROW_BLOCK rows, so the blocked path runs too
    q, s = quantize_weight(torch.randn(64, 96, generator=g))
    full = w8a8_linear(x, q, s)
    for i in (0, 7, 299):
        assert torch.equal(w8a8_linear(x[i : i + 1], q, s), full[i : i + 1])
    assert torch.equal(w8a8_linear(x[250:270], q, s), full[250:270])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows", [1, 7, 256, 300])
@pytest.mark.parametrize("with_bias", [False, True])
# 16-lane vector loops and their scalar tails; for the packed-weight GEMM also input channels past a whole quad
# (30) and column groups of one and two panels (37 = 3 panels, the last partial; 160 = 10 panels)
@pytest.mark.parametrize(("k", "n"), [(64, 96), (72, 100), (30, 37), (64, 160)])
def test_native_w8a8_linear_is_bit_identical_to_reference(dtype: torch.dtype, rows: int, with_bias: bool, k: int,
                                                          n: int) -> None:
    """The C++ quantize/dequantize passes do the reference's float ops in the same order: equal bits, so int8
    outputs (and the eval numbers) do not depend on whether the native kernels built."""
    from kernels.cpu import native_ops
    from kernels.cpu.int8_linear import make_w8a8_linear

    ops = native_ops()
    if ops is None:
        pytest.skip("native CPU kernels did not build here")
    g = torch.Generator().manual_seed(rows)
    q, s = quantize_weight(torch.randn(n, k, generator=g) * 0.05)
    x = (torch.randn(2, rows, k, generator=g) * 3).to(dtype)
    x[0, 0] = 0  # an all-zero row takes the minimum scale
    bias = torch.randn(n, generator=g).to(dtype) if with_bias else None
    y = make_w8a8_linear(ops)(x, q, s, bias)
    assert y.dtype == dtype and y.shape == (2, rows, n)
    assert torch.equal(y, w8a8_linear(x, q, s, bias))
    xq, xs = ops.quantize_rows(x.reshape(-1, k))
    rq, rs = quantize_activation(x.reshape(-1, k))
    assert torch.equal(xq, rq) and torch.equal(xs, rs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_native_quantization_rounds_halves_to_even_in_vector_lanes_and_tails(dtype: torch.dtype) -> None:
    """Values exactly half-way between two steps (scale 1: the row's largest |x| is 127) in every position of the
    vector loops and the scalar tail: the native pass rounds them to even like the reference, never away from 0."""
    from kernels.cpu import native_ops
    from kernels.cpu.int8_linear import make_w8a8_linear

    ops = native_ops()
    if ops is None:
        pytest.skip("native CPU kernels did not build here")
    halves = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 100.5, -126.5, 3.5, -3.5, 41.5])
    x = torch.stack([halves.roll(i).repeat(4)[:43] for i in range(6)])  # K = 43: 5 lanes of 8 and a tail of 3
    x[:, 0] = 127.0
    x[3, 0] = -127.0
    x = x.to(dtype)
    xq, xs = ops.quantize_rows(x)
    rq, rs = quantize_activation(x)
    assert torch.equal(xs, rs) and torch.all(xs == 1.0)
    assert torch.equal(xq, rq)
    # row 0 after its 127: 1.5 2.5 -0.5 -1.5 -2.5 100.5 -126.5 3.5 -3.5 41.5
    assert xq[0, 1:11].tolist() == [2, 2, 0, -2, -2, 100, -126, 4, -4, 42]
    q, s = quantize_weight(torch.randn(9, 43, generator=torch.Generator().manual_seed(3)) * 0.05)
    assert torch.equal(make_w8a8_linear(ops)(x, q, s), w8a8_linear(x, q, s))


def test_native_w8a8_linear_extreme_values_do_not_saturate() -> None:
    """Every product +-127 * 127 with one sign, the largest sums a K=1536 layer makes: the AVX2 kernel's byte pairs
    (|x| * w * sign(x) in int16) stay below 32767 and its int32 sums are exact, like the VNNI kernel's."""
    from kernels.cpu import native_ops
    from kernels.cpu.int8_linear import make_w8a8_linear

    ops = native_ops()
    if ops is None:
        pytest.skip("native CPU kernels did not build here")
    x = torch.full((5, 1536), 2.0)
    x[1] = -2.0
    x[2, ::2] = -2.0
    x[3, 7] = 0.0
    q = torch.full((9, 1536), 127, dtype=torch.int8)
    q[2] = -127
    q[4, 1::2] = -127
    s = torch.full((9,), 0.5)
    y = make_w8a8_linear(ops)(x, q, s)
    assert torch.equal(y, w8a8_linear(x, q, s))
    xq, xs = quantize_activation(x)
    assert torch.equal(y.double(), (_int64_mm(xq, q).double() * 0.5 * xs.double()).float().double())


def test_packed_int8_weight_round_trips_and_feeds_the_same_product() -> None:
    """The packed layout (VNNI or AVX2 kernel) holds the weight exactly: Int8Linear keeps only it and gives qweight
    back."""
    from kernels.cpu import native_ops
    from kernels.cpu.int8_linear import make_w8a8_linear

    ops = native_ops()
    if ops is None or not ops.has_int8_gemm():
        pytest.skip("the packed-weight int8 GEMM did not build here (needs AVX512-VNNI or AVX2)")
    g = torch.Generator().manual_seed(9)
    q, s = quantize_weight(torch.randn(37, 30, generator=g))
    packed = ops.pack_int8_weight(q)
    assert torch.equal(ops.unpack_int8_weight(packed, 37, 30), q)
    matmul = make_w8a8_linear(ops)
    x = torch.randn(11, 30, generator=g).to(torch.bfloat16)
    assert torch.equal(matmul(x, packed, s, None, packed=True), w8a8_linear(x, q, s))
    with pytest.raises(RuntimeError, match="pack_int8_weight"):
        ops.int8_linear(x, packed[:-1], 37, s, None)
    lin = Int8Linear(q, s, None, matmul)
    assert lin.int8_weight is None and lin.packed_weight is not None
    assert torch.equal(lin.qweight, q) and lin.out_features == 37
    assert torch.equal(lin(x), w8a8_linear(x, q, s))


def test_weight_only_reference_equals_float_linear_on_dequantized_weight() -> None:
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 4, 40, generator=g)
    q, s = quantize_weight(torch.randn(24, 40, generator=g))
    y = weight_only_linear(x, q, s)
    assert y.shape == (3, 4, 24)
    torch.testing.assert_close(y, F.linear(x, dequantize_weight(q, s)), rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------------------------- Int8Linear
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 0.02), (torch.bfloat16, 0.03)])
def test_int8_linear_close_to_float_linear(dtype: torch.dtype, tol: float) -> None:
    g = torch.Generator().manual_seed(5)
    lin = Linear((torch.randn(96, 64, generator=g) * 0.1).to(dtype), torch.randn(96, generator=g).to(dtype))
    qlin = Int8Linear.from_linear(lin, get_kernels("cpu").int8_linear)
    assert qlin.qweight.dtype == torch.int8 and qlin.out_features == 96
    x = torch.randn(10, 64, generator=g).to(dtype)
    y = qlin(x)
    assert y.dtype == dtype and y.shape == (10, 96)
    assert _rel_err(y, lin(x)) < tol


def test_int8_linear_rejects_bad_inputs() -> None:
    matmul = get_kernels("cpu").int8_linear
    with pytest.raises(ValueError, match="int8"):
        Int8Linear(torch.zeros(4, 4), torch.ones(4), None, matmul)
    with pytest.raises(ValueError, match="scale"):
        Int8Linear(torch.zeros(4, 4, dtype=torch.int8), torch.ones(3), None, matmul)


# ------------------------------------------------------------------------------------------------------ engine
_PROJ = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


def _prompts(n: int, vocab: int = 384, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[0] + [rng.randrange(2, vocab) for _ in range(rng.randrange(3, 40))] for _ in range(n)]


def _greedy(llm: LLM, prompts: list[list[int]], n: int = 12) -> list[list[int]]:
    return [o.outputs[0].token_ids for o in llm.generate(prompts, SamplingParams(max_tokens=n, ignore_eos=True), progress=False)]


def test_quantize_model_swaps_only_decoder_projections(checkpoints: dict[str, Path]) -> None:
    llm = LLM(checkpoints["qwen2"], dtype="float32", device="cpu")
    model = llm.model
    before = linear_weight_bytes(model)
    embed = model.embed
    quantize_model(model, "int8")
    for layer in model.layers:
        for attr in _PROJ:
            assert isinstance(getattr(layer, attr), Int8Linear)
        assert layer.qkv_proj.bias is not None  # Qwen2's qkv bias survives, in float
    # The LM head too; the (tied) embedding table stays in float for lookups, so the int8 head is an extra copy.
    assert isinstance(model.lm_head, Int8Linear) and model.embed is embed and model.embed.dtype == torch.float32
    vocab, hidden = model.embed.shape
    after = linear_weight_bytes(model)
    # fp32 -> int8 + fp32 per-channel scales (+ fp32 bias): about a quarter of the projection bytes.
    assert after["projections"] < 0.3 * before["projections"]
    # The head: int8 weights + a float32 scale per row; packed for the VNNI kernel, also an int32 column sum per
    # row; the AVX2 kernel's packing adds nothing (vocab and hidden are whole panels and quads here: no padding).
    packed = model.lm_head.packed_weight
    extra = 0 if packed is None else packed.numel() - vocab * hidden
    assert extra in (0, 4 * vocab)
    assert after["other"] == before["other"] + vocab * hidden + 4 * vocab + extra
    quantize_model(model, "int8")  # idempotent
    with pytest.raises(ValueError, match="unknown quantization"):
        quantize_model(model, "int4")


def test_engine_int8_generates_and_mostly_agrees_with_float(checkpoints: dict[str, Path]) -> None:
    prompts = _prompts(48)
    ref = LLM(checkpoints["llama"], dtype="float32", device="cpu")
    q = LLM(checkpoints["llama"], dtype="float32", device="cpu", quantization="int8")
    assert q.config_summary()["quantization"] == "int8"
    a, b = _greedy(ref, prompts), _greedy(q, prompts)
    assert all(len(t) == 12 for t in b)
    first = sum(x[0] == y[0] for x, y in zip(a, b)) / len(a)
    assert first >= 0.85, f"int8 first greedy token agrees with float on only {first:.0%} of prompts"
    # Batch invariance carries through the whole model: a request alone gets the same tokens as in the batch.
    assert _greedy(q, prompts[3:4]) == b[3:4]


@pytest.mark.parametrize("arch", ["qwen2", "mistral"])  # qkv bias + tied embeddings; sharded source checkpoint
def test_quantize_checkpoint_round_trip(checkpoints: dict[str, Path], tmp_path: Path, arch: str) -> None:
    src = checkpoints[arch]
    dst = quantize_checkpoint(src, tmp_path / "int8")
    raw = json.loads((dst / "config.json").read_text())
    assert raw["quantization_config"]["quant_method"] == "engine_int8"
    assert checkpoint_quantization(dst) == "int8" and checkpoint_quantization(src) is None
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert (dst / name).read_bytes() == (src / name).read_bytes()
    with safe_open(str(dst / "model.safetensors"), framework="pt") as f:
        assert f.get_tensor("model.layers.0.mlp.down_proj.weight").dtype == torch.int8
        assert f.get_tensor("model.layers.0.mlp.down_proj.weight_scale").dtype == torch.float32
        assert f.get_tensor("model.embed_tokens.weight").dtype == torch.float32
        assert f.get_tensor("model.norm.weight").dtype == torch.float32

    prompts = _prompts(12, seed=1)
    pre = LLM(dst, dtype="float32", device="cpu")  # quantization picked up from config.json
    assert pre.config_summary()["quantization"] == "int8"
    assert all(isinstance(getattr(layer, a), Int8Linear) for layer in pre.model.layers for a in _PROJ)
    fly = LLM(src, dtype="float32", device="cpu", quantization="int8")
    for a, b in zip(pre.model.layers, fly.model.layers):
        assert torch.equal(a.gate_up_proj.qweight, b.gate_up_proj.qweight)
        assert torch.equal(a.qkv_proj.scale, b.qkv_proj.scale)
    assert _greedy(pre, prompts) == _greedy(fly, prompts)


def test_quantize_checkpoint_refuses_to_clobber_or_requantize(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    src = checkpoints["llama"]
    dst = quantize_checkpoint(src, tmp_path / "q")
    with pytest.raises(FileExistsError):
        quantize_checkpoint(src, dst)
    quantize_checkpoint(src, dst, overwrite=True)
    with pytest.raises(ValueError, match="already quantized"):
        quantize_checkpoint(dst, tmp_path / "qq")


def test_unknown_quantization_config_is_a_clear_load_error(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    d = tmp_path / "gptq"
    shutil.copytree(checkpoints["llama"], d)
    raw = json.loads((d / "config.json").read_text())
    raw["quantization_config"] = {"quant_method": "gptq", "bits": 4}
    (d / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ModelLoadError, match="gptq"):
        LLM(d, dtype="float32", device="cpu")
