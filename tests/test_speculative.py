"""Speculative decoding: prompt lookup and a draft model inside continuous batching keep greedy outputs
identical to Hugging Face (float32, tiny Llama and Qwen2), with and without a JSON-schema constraint, under a
small token budget and under preemption; sampled drafts keep the target distribution; grammar-forced tokens are
drafted for free; the policy switches drafting off when it would not pay."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from engine import LLM, SamplingParams
from engine.speculative import SpeculativeConfig
from engine.speculative.policy import Acceptance, StepCostModel, draft_lengths
from engine.speculative.rejection import verify_drafts
from tests.helpers.checkpoints import make_checkpoint
from tests.helpers.hf_reference import hf_greedy

MAX_NEW = 24


def _prompts(seed: int = 5) -> list[list[int]]:
    """Random prompts and one that repeats itself, so prompt lookup finds matches in the prompt and the output."""
    rng = random.Random(seed)
    prompts = [[0] + [rng.randrange(2, 384) for _ in range(n)] for n in (3, 9, 16, 33, 70)]
    prompts.append([0] + [11, 12, 13, 14, 15] * 8)
    return prompts


@pytest.fixture(scope="module")
def drafts(checkpoints, tmp_path_factory) -> dict[str, Path]:
    """Draft models: smaller random models with the same tokenizer (poor drafts), per architecture."""
    root = tmp_path_factory.mktemp("drafts")
    return {arch: make_checkpoint(root / arch, arch, hidden_size=32, num_layers=1, intermediate_size=64, seed=7)
            for arch in ("llama", "qwen2")}


@pytest.fixture(scope="module")
def refs(checkpoints) -> dict[str, list[list[int]]]:
    return {arch: [hf_greedy(checkpoints[arch], p, MAX_NEW, ignore_eos=True) for p in _prompts()]
            for arch in ("llama", "qwen2")}


def _spec(kind: str, checkpoints, drafts, arch: str) -> dict:
    if kind == "ngram":
        return {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}
    model = checkpoints[arch] if kind == "self_draft" else drafts[arch]
    # The cost model would rightly never draft with a model as large as the target (or, at these tiny sizes, a
    # third of it): fixed draft lengths exercise the mechanism; the policy has its own tests.
    return {"method": "draft_model", "model": str(model), "num_speculative_tokens": 3, "adaptive": False}


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("kind", ["ngram", "draft", "self_draft"])
@pytest.mark.parametrize("prefix_caching", [True, False])
def test_greedy_tokens_identical_to_hf(checkpoints, drafts, refs, arch, kind, prefix_caching):
    params = SamplingParams(max_tokens=MAX_NEW, min_tokens=MAX_NEW, ignore_eos=True)
    llm = LLM(checkpoints[arch], dtype="float32", block_size=8, enable_prefix_caching=prefix_caching,
              speculative_config=_spec(kind, checkpoints, drafts, arch))
    outs = llm.generate(_prompts(), params, progress=False)
    assert [o.outputs[0].token_ids for o in outs] == refs[arch]
    stats = llm.stats()
    assert stats["spec_draft_tokens"] > 0
    if kind == "self_draft":  # the target drafting for itself: every draft is its own argmax
        assert stats["spec_acceptance_rate"] > 0.9
    if kind == "ngram":
        assert stats["spec_accepted_tokens"] > 0
    assert sum(o.metrics.num_draft_tokens for o in outs) == stats["spec_draft_tokens"]
    assert sum(o.metrics.num_accepted_tokens for o in outs) == stats["spec_accepted_tokens"]
    assert llm.block_manager.num_used == 0
    if prefix_caching:  # only verified blocks were published: a second pass reads them and keeps the tokens
        again = llm.generate(_prompts(), params, progress=False)
        assert [o.outputs[0].token_ids for o in again] == refs[arch]
        assert llm.stats()["prefix_cache_hits"] > 0


@pytest.mark.parametrize("kind", ["ngram", "self_draft"])
def test_greedy_identical_under_small_budget_and_preemption(checkpoints, drafts, refs, kind):
    params = SamplingParams(max_tokens=MAX_NEW, min_tokens=MAX_NEW, ignore_eos=True)
    kv = 14 * 8 * 2 * 2 * 2 * 16 * 4  # 14 blocks of 8 tokens: the six prompts cannot all stay resident
    llm = LLM(checkpoints["llama"], dtype="float32", block_size=8, max_num_batched_tokens=16, kv_cache_memory=kv,
              speculative_config=dict(_spec(kind, checkpoints, drafts, "llama"), compute_bound_tokens=64))
    outs = llm.generate(_prompts(), params, progress=False)
    assert [o.error for o in outs] == [None] * len(outs)
    assert [o.outputs[0].token_ids for o in outs] == refs["llama"]
    stats = llm.stats()
    assert stats["num_preemptions"] > 0 and stats["spec_accepted_tokens"] > 0


# ---- structured output -------------------------------------------------------------------------------------------
SCHEMA = {
    "type": "object",
    "properties": {
        "invoice_number": {"type": "string", "maxLength": 12},
        "status": {"enum": ["paid", "open", "overdue"]},
        "lines": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
    },
    "required": ["invoice_number", "status", "lines"],
}


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("kind", ["ngram", "draft"])
def test_greedy_identical_under_json_schema(checkpoints, drafts, arch, kind):
    params = SamplingParams(max_tokens=64, json_schema=SCHEMA)
    prompts = _prompts()
    plain_llm = LLM(checkpoints[arch], dtype="float32", block_size=8)
    plain = plain_llm.generate(prompts, params, progress=False)
    llm = LLM(checkpoints[arch], dtype="float32", block_size=8,
              speculative_config=_spec(kind, checkpoints, drafts, arch))
    outs = llm.generate(prompts, params, progress=False)
    assert [o.outputs[0].token_ids for o in outs] == [o.outputs[0].token_ids for o in plain]
    assert [o.outputs[0].finish_reason for o in outs] == [o.outputs[0].finish_reason for o in plain]
    for o in outs:
        if o.outputs[0].finish_reason == "stop":
            assert set(json.loads(o.outputs[0].text)) == {"invoice_number", "status", "lines"}
    stats = llm.stats()
    # The grammar forces the keys and punctuation: those drafts come free and are (nearly) always accepted.
    assert stats["spec_forced_tokens"] > 0 and stats["spec_accepted_tokens"] >= stats["spec_forced_tokens"] // 2
    assert stats["steps"] < plain_llm.stats()["steps"]


def test_fast_forward_alone_saves_steps(checkpoints):
    """Grammar-forced tokens need no proposer: even with a proposer that never matches, a constrained request
    takes fewer steps than it has output tokens, with the same tokens."""
    params = SamplingParams(max_tokens=64, json_schema=SCHEMA)
    prompts = _prompts()[:3]
    plain = LLM(checkpoints["llama"], dtype="float32", block_size=8)
    base = plain.generate(prompts, params, progress=False)
    spec = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 30, "prompt_lookup_max": 30}
    llm = LLM(checkpoints["llama"], dtype="float32", block_size=8, speculative_config=spec)
    outs = llm.generate(prompts, params, progress=False)
    assert [o.outputs[0].token_ids for o in outs] == [o.outputs[0].token_ids for o in base]
    stats = llm.stats()
    assert stats["spec_forced_tokens"] > 0
    assert stats["steps"] < plain.stats()["steps"]


# ---- sampling ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["ngram", "draft"])
def test_seeded_sampling_repeats_exactly(checkpoints, drafts, kind):
    params = [SamplingParams(max_tokens=MAX_NEW, temperature=0.9, top_p=0.95, seed=s, ignore_eos=True)
              for s in range(len(_prompts()))]
    spec = _spec(kind, checkpoints, drafts, "llama")
    a = LLM(checkpoints["llama"], dtype="float32", block_size=8, speculative_config=spec)
    b = LLM(checkpoints["llama"], dtype="float32", block_size=8, speculative_config=spec)
    first = [o.outputs[0].token_ids for o in a.generate(_prompts(), params, progress=False)]
    assert first == [o.outputs[0].token_ids for o in b.generate(_prompts(), params, progress=False)]
    assert all(len(t) == MAX_NEW for t in first) and a.stats()["spec_draft_tokens"] > 0


def _chi_square(counts: dict, probs: dict, n: int) -> tuple[float, int]:
    stat, cells = 0.0, 0
    for key, p in probs.items():
        expected = n * p
        if expected < 5:
            continue
        stat += (counts.get(key, 0) - expected) ** 2 / expected
        cells += 1
    return stat, cells - 1


def _chi2_999(df: int) -> float:
    """99.9% quantile of chi-square with df degrees of freedom (Wilson-Hilferty; within 1% for df >= 3), so a
    correct sampler fails by chance once in a thousand seeds at most (the generator is seeded: a pass repeats)."""
    a = 2 / (9 * df)
    return df * (1 - a + 3.090 * a**0.5) ** 3


@pytest.mark.parametrize("proposal", ["draft_distribution", "point_mass"])
def test_rejection_sampling_keeps_the_target_distribution(proposal):
    """Two drafted positions over a 5-token vocabulary: the joint law of the first two emitted tokens must be
    the target's p0(x) p1(y | x), whatever the drafts' law q (chi-square goodness of fit)."""
    vocab, n = 5, 12_000
    gen = torch.Generator().manual_seed(1234)
    p0 = torch.tensor([0.05, 0.4, 0.25, 0.2, 0.1])
    p1 = torch.softmax(torch.randn(vocab, vocab, generator=gen) * 1.5, -1)  # p1[x] = law of y after x
    p2 = torch.softmax(torch.randn(vocab, vocab, generator=gen), -1)
    q0 = torch.tensor([0.3, 0.1, 0.1, 0.3, 0.2])
    q1 = torch.softmax(torch.randn(vocab, vocab, generator=gen), -1)
    counts: dict[tuple[int, int], int] = {}
    for _ in range(n):
        if proposal == "draft_distribution":
            d0 = int(torch.multinomial(q0, 1, generator=gen))
            d1 = int(torch.multinomial(q1[d0], 1, generator=gen))
            q = torch.stack([q0, q1[d0]])
        else:  # a fixed guess, like prompt lookup: always propose tokens 3 then 1
            d0, d1, q = 3, 1, None
        probs = torch.stack([p0, p1[d0], p2[d1]])
        out = verify_drafts(probs, [d0, d1], q, gen)
        x = out[0]
        if len(out) >= 2:
            y = out[1]
        else:  # the first draft was rejected and x resampled: the next token would follow x under p1
            y = int(torch.multinomial(p1[x], 1, generator=gen))
        counts[(x, y)] = counts.get((x, y), 0) + 1
    target = {(x, y): float(p0[x] * p1[x, y]) for x in range(vocab) for y in range(vocab)}
    stat, df = _chi_square(counts, target, n)
    assert df >= 15, df
    assert stat < _chi2_999(df), (stat, df, counts)


def test_rejection_sampling_never_resamples_the_rejected_draft():
    gen = torch.Generator().manual_seed(0)
    probs = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    for _ in range(200):
        out = verify_drafts(probs, [1], torch.tensor([[0.0, 1.0, 0.0]]), gen)
        assert out[0] in (0, 1) and (out[0] == 1 or len(out) == 1)


# ---- policy ------------------------------------------------------------------------------------------------------
def test_policy_drafts_fully_when_memory_bound_and_declines_when_compute_bound():
    model = StepCostModel(knee_tokens=64, overhead_tokens=2.0)
    assert draft_lengths([0.8] * 4, [4] * 4, 4, 4, 1000, model) == [4] * 4  # 4 + 16 tokens, under the knee
    busy = draft_lengths([0.5] * 128, [4] * 128, 128, 128, 1000, model)  # 128 tokens: already compute-bound
    assert sum(busy) == 0
    sure = draft_lengths([0.999] * 128, [4] * 128, 128, 128, 1000, model)  # near-certain drafts still pay
    assert sum(sure) > 0
    assert sum(draft_lengths([0.9] * 4, [4] * 4, 4, 4, 5, model)) == 5  # the token budget caps the drafts


def test_policy_shortens_drafts_as_acceptance_falls():
    model = StepCostModel(knee_tokens=4, overhead_tokens=1.0)
    good, bad = Acceptance(), Acceptance()
    for _ in range(10):
        good.update(4, 4)
        bad.update(4, 0)
    lengths = draft_lengths([good.rate, bad.rate], [6, 6], 2, 2, 100, model)
    assert lengths[0] > lengths[1] and good.rate > 0.9 and bad.rate < 0.1


# ---- configuration -----------------------------------------------------------------------------------------------
def test_config_errors_are_clear(checkpoints, tmp_path):
    with pytest.raises(ValueError, match="needs 'model'"):
        SpeculativeConfig(method="draft_model")
    with pytest.raises(ValueError, match="must not exceed"):
        SpeculativeConfig(method="ngram", prompt_lookup_min=4, prompt_lookup_max=2)
    assert SpeculativeConfig(method="ngram", prompt_lookup_max=3).lookup_range == (3, 3)
    other = make_checkpoint(tmp_path / "other", "llama", tokenizer=False)
    from tests.helpers.checkpoints import build_tokenizer

    tok = build_tokenizer(tmp_path / "other", vocab_size=300)  # a different vocabulary
    assert tok is not None
    with pytest.raises(ValueError, match="different tokenizer"):
        LLM(checkpoints["llama"], dtype="float32", speculative_config={"method": "draft_model", "model": str(other)})
    summary = LLM(checkpoints["llama"], dtype="float32",
                  speculative_config={"method": "ngram"}).config_summary()["speculative_config"]
    assert summary["method"] == "ngram" and summary["num_speculative_tokens"] == 4


def test_a_gguf_draft_model_for_a_directory_target(checkpoints, drafts, refs, tmp_path):
    """`model` may be a GGUF file: its rebuilt tokenizer has the same vocabulary as the target's directory."""
    from tests.helpers.gguf_files import write_gguf

    gguf = write_gguf(drafts["llama"], tmp_path / "draft.gguf", "F32")
    params = SamplingParams(max_tokens=MAX_NEW, min_tokens=MAX_NEW, ignore_eos=True)
    llm = LLM(checkpoints["llama"], dtype="float32", block_size=8,
              speculative_config={"method": "draft_model", "model": str(gguf), "adaptive": False})
    assert [o.outputs[0].token_ids for o in llm.generate(_prompts(), params, progress=False)] == refs["llama"]
    assert llm.stats()["spec_draft_tokens"] > 0
