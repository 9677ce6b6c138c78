"""Per-token log-probabilities: the model's own (raw logits, before any mask), equal to transformers' log-softmax
at each emitted token in float32, also under a JSON-schema constraint, and never changing which tokens come out."""

from __future__ import annotations

import math

import pytest
import torch

from engine import LLM, SamplingParams
from tests.helpers.hf_reference import _model

PROMPTS = [[1, 5, 9, 33, 70], [1, 200, 13, 7, 7, 91, 12]]


def _hf_logprobs(model_dir, prompt: list[int], out: list[int]) -> torch.Tensor:
    """[len(out), vocab]: transformers' log-softmax at each position that emitted a token of `out`."""
    model = _model(str(model_dir))
    ids = torch.tensor([prompt + out])
    with torch.inference_mode():
        logits = model(ids).logits[0].float()
    return torch.log_softmax(logits, -1)[len(prompt) - 1: len(prompt) - 1 + len(out)]


@pytest.mark.parametrize("schema", [None, {"type": "object", "properties": {"a": {"type": "integer"}},
                                           "required": ["a"], "additionalProperties": False}],
                         ids=["free", "json-schema"])
def test_logprobs_are_the_models_own(checkpoints, schema) -> None:
    """logprobs=0: each emitted token's own log-probability; logprobs=3: also the three most likely tokens at
    each position, ranked, as vLLM reports them."""
    path = checkpoints["llama"]
    llm = LLM(str(path), dtype="float32")
    plain = llm.generate(PROMPTS, SamplingParams(max_tokens=10, temperature=0.0, json_schema=schema,
                                                 ignore_eos=schema is None), progress=False)
    for k in (0, 3):
        with_lp = SamplingParams(max_tokens=10, temperature=0.0, logprobs=k, json_schema=schema,
                                 ignore_eos=schema is None)
        outs = llm.generate(PROMPTS, with_lp, progress=False)
        for o, p, prompt in zip(outs, plain, PROMPTS):
            got, alone = o.outputs[0], p.outputs[0]
            assert got.token_ids == alone.token_ids and alone.logprobs is None
            assert got.logprobs is not None and len(got.logprobs) == len(got.token_ids)
            ref = _hf_logprobs(path, prompt, got.token_ids)
            own = [got.logprobs[j][t].logprob for j, t in enumerate(got.token_ids)]
            want = [float(ref[j, t]) for j, t in enumerate(got.token_ids)]
            assert all(math.isclose(a, b, abs_tol=1e-4) for a, b in zip(own, want)), (own, want)
            assert math.isclose(got.cumulative_logprob, sum(own), abs_tol=1e-6)
            for j, position in enumerate(got.logprobs):
                ranked = sorted((lp.rank, t) for t, lp in position.items() if lp.rank is not None)
                assert [t for _, t in ranked] == ref[j].topk(k).indices.tolist() if k else ranked == []
                assert all(math.isclose(position[t].logprob, float(ref[j, t]), abs_tol=1e-4) for t in position)


def test_the_older_boolean_form_still_works_and_warns(checkpoints) -> None:
    llm = LLM(str(checkpoints["llama"]), dtype="float32")
    with pytest.warns(DeprecationWarning):
        params = SamplingParams(max_tokens=4, temperature=0.0, logprobs=True, ignore_eos=True)
    out = llm.generate(PROMPTS[:1], params, progress=False)[0]
    with pytest.warns(DeprecationWarning):
        flat = out.logprobs
    assert flat == [out.outputs[0].logprobs[j][t].logprob for j, t in enumerate(out.outputs[0].token_ids)]


def test_field_logprobs_sum_the_tokens_that_spell_each_value() -> None:
    from pipeline.infer.confidence import field_logprobs, value_spans
    from tests.helpers.fake_llm import ByteTokenizer

    tok = ByteTokenizer()
    text = '{"issuer":"Ab","reference":null,"amount":"1.50"}'
    ids = tok.encode(text)[1:]  # one token per byte, no BOS
    assert value_spans(text, ("issuer", "reference", "amount")) == {"issuer": (10, 14), "reference": (27, 31),
                                                                    "amount": (41, 47)}
    lps = [-0.5 if 10 <= i < 14 else -0.01 for i in range(len(ids))]
    got = field_logprobs(text, ids, lps, tok, ("issuer", "reference", "amount"))
    assert got == {"issuer": -2.0, "reference": -0.04, "amount": -0.06}
    assert field_logprobs(text, ids, None, tok, ("issuer",)) is None
