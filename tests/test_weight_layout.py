"""CPU float32 linear weights in input-major storage (engine/models/weight_layout.py): the same values and the
same greedy outputs as row-major, no second copy of a tied embedding, quantized layers left alone."""

from __future__ import annotations

import pytest
import torch

import engine.models.loader as loader
from engine import LLM, SamplingParams
from engine.models.layers import Linear
from engine.models.weight_layout import input_major_is_faster, store_input_major


def _llm(path: object, monkeypatch: pytest.MonkeyPatch, input_major: bool, **kw: object) -> LLM:
    monkeypatch.setattr(loader, "input_major_is_faster", lambda: input_major)
    return LLM(path, device="cpu", dtype="float32", **kw)


def _float_linears(model: torch.nn.Module) -> list[Linear]:
    return [m for m in model.modules() if isinstance(m, Linear) and m.weight.dtype == torch.float32]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])  # qwen2's test checkpoint ties its embedding and LM head
def test_input_major_weights_keep_values_and_greedy_outputs(checkpoints, monkeypatch, arch):
    rows = _llm(checkpoints[arch], monkeypatch, False)
    cols = _llm(checkpoints[arch], monkeypatch, True)
    a, b = _float_linears(rows.model), _float_linears(cols.model)
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert x.weight.is_contiguous() and not y.weight.is_contiguous()
        assert y.weight.t().is_contiguous() and torch.equal(x.weight, y.weight)
    if rows.model_config.tie_word_embeddings:  # one table, not a copy per layout
        assert cols.model.embed.data_ptr() == cols.model.lm_head.weight.data_ptr()
    assert torch.equal(rows.model.embed, cols.model.embed)
    prompts = [[0] + list(range(5, 5 + n)) for n in (3, 11, 40)]
    params = SamplingParams(max_tokens=12, min_tokens=12, ignore_eos=True, logprobs=0)
    want = rows.generate(prompts, params, progress=False)
    got = cols.generate(prompts, params, progress=False)
    assert [o.outputs[0].token_ids for o in got] == [o.outputs[0].token_ids for o in want]


def test_quantized_layers_are_left_as_they_are(checkpoints, monkeypatch):
    rows = _llm(checkpoints["llama"], monkeypatch, False, quantization="int8")
    cols = _llm(checkpoints["llama"], monkeypatch, True, quantization="int8")
    int8 = [b for b in cols.model.buffers() if b.dtype == torch.int8]
    assert int8 and all(b.is_contiguous() for b in int8)
    assert all(torch.equal(a, b) for a, b in zip(rows.model.buffers(), cols.model.buffers()))
    assert store_input_major(cols.model) == len(_float_linears(cols.model))  # only float layers move
    prompts = [[0] + list(range(5, 5 + n)) for n in (3, 17)]
    params = SamplingParams(max_tokens=8, min_tokens=8, ignore_eos=True)
    assert ([o.outputs[0].token_ids for o in cols.generate(prompts, params, progress=False)]
            == [o.outputs[0].token_ids for o in rows.generate(prompts, params, progress=False)])


def test_the_layout_choice_is_measured_once():
    assert input_major_is_faster() is input_major_is_faster()
    assert input_major_is_faster.cache_info().currsize == 1
