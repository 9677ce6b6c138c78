"""Per-token log-probabilities: the model's own (raw logits, before any mask), equal to transformers' log-softmax
at each emitted token in float32, also under a JSON-schema constraint, and never changing which tokens come out."""

from __future__ import annotations

import math

import pytest
import torch

from engine import LLM, SamplingParams
from tests.helpers.hf_reference import _model

PROMPTS = [[1, 5, 9, 33, 70], [1, 200, 13, 7, 7, 91, 12]]


def _hf_logprobs(model_dir, prompt: list[int], out: list[int]) -> list[float]:
    model = _model(str(model_dir))
    ids = torch.tensor([prompt + out])
    with torch.inference_mode():
        logits = model(ids).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    return [float(lp[len(prompt) - 1 + j, t]) for j, t in enumerate(out)]


@pytest.mark.parametrize("schema", [None, {"type": "object", "properties": {"a": {"type": "integer"}},
                                           "required": ["a"], "additionalProperties": False}],
                         ids=["free", "json-schema"])
def test_logprobs_are_the_models_own(checkpoints, schema) -> None:
    path = checkpoints["llama"]
    llm = LLM(str(path), dtype="float32")
    with_lp = SamplingParams(max_tokens=10, temperature=0.0, logprobs=True, json_schema=schema,
                             ignore_eos=schema is None)
    outs = llm.generate(PROMPTS, with_lp, progress=False)
    plain = llm.generate(PROMPTS, SamplingParams(max_tokens=10, temperature=0.0, json_schema=schema,
                                                 ignore_eos=schema is None), progress=False)
    for o, p, prompt in zip(outs, plain, PROMPTS):
        assert o.token_ids == p.token_ids and p.logprobs is None
        assert o.logprobs is not None and len(o.logprobs) == len(o.token_ids)
        ref = _hf_logprobs(path, prompt, o.token_ids)
        assert all(math.isclose(a, b, abs_tol=1e-4) for a, b in zip(o.logprobs, ref)), (o.logprobs, ref)
        assert all(lp <= 0.0 for lp in o.logprobs)


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
