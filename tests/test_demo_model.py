"""The shipped demo model: HF-format files, size budget, and token-for-token greedy parity
between Hugging Face transformers and our engine (float32) on real eval prompts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from pypdf import PdfReader
from tokenizers import Tokenizer

from pipeline.ingest.pdf_text import document_text, page_texts
from pipeline.plan.prompts import render_document_prompt, render_window_prompt

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "data" / "models" / "finextract-3m"
EVAL = ROOT / "data" / "eval"
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json")

pytestmark = pytest.mark.skipif(not (MODEL / "model.safetensors").is_file(),
                                reason="demo model not trained yet (data/tools/train_model.py)")


def _prompts(n_docs: int = 3, n_windows: int = 1) -> list[str]:
    docs = [json.loads(x) for x in (EVAL / "documents.jsonl").open(encoding="utf-8")]
    docs = [d for d in docs if not d["needs_ocr"]]
    # one short, one long (multi-page statement) and one of another type
    picks = [docs[0], max(docs, key=lambda d: (EVAL / d["file"]).stat().st_size), docs[2]][:n_docs]
    out = [render_document_prompt(document_text(page_texts(PdfReader(EVAL / d["file"])))) for d in picks]
    windows = [json.loads(x) for x in (EVAL / "windows.jsonl").open(encoding="utf-8")][:n_windows]
    return out + [render_window_prompt(w["facts"]) for w in windows]


def test_checkpoint_files_and_budget():
    for name in FILES:
        assert (MODEL / name).is_file(), name
    cfg = json.loads((MODEL / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    assert cfg["max_position_embeddings"] >= 2048
    assert (MODEL / "model.safetensors").stat().st_size <= 25 * 1024 * 1024
    tok = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    assert tok.get_vocab_size() == cfg["vocab_size"]
    ids = tok.encode("Total 2024").ids
    assert ids[0] == cfg["bos_token_id"]
    assert [tok.id_to_token(i) for i in ids[-4:]] == ["2", "0", "2", "4"]  # digits are single tokens


def test_transformers_tokenizer_agrees_with_tokenizer_json():
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(MODEL)
    raw = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    text = _prompts(1, 0)[0]
    assert hf(text)["input_ids"] == raw.encode(text).ids
    assert hf.eos_token == "</s>" and hf.bos_token == "<s>"


def test_greedy_parity_with_transformers():
    from engine import LLM, SamplingParams
    from tests.helpers.hf_reference import hf_greedy

    tok = Tokenizer.from_file(str(MODEL / "tokenizer.json"))
    prompts = [tok.encode(p).ids for p in _prompts()]
    max_new = 96
    refs = []
    eos = json.loads((MODEL / "config.json").read_text())["eos_token_id"]
    for p in prompts:
        ref = hf_greedy(MODEL, p, max_new)
        refs.append(ref[: ref.index(eos) + 1] if eos in ref else ref)
    llm = LLM(MODEL, dtype="float32", device="cpu")
    outs = llm.generate(prompts, SamplingParams(max_tokens=max_new, temperature=0.0), progress=False)
    assert [o.outputs[0].token_ids for o in outs] == refs
    assert any(len(p) > 1000 for p in prompts)  # a long multi-page document is among them


def test_constrained_output_validates():
    from engine import LLM, SamplingParams
    from schemas import AccountWindowSummary, DocumentExtraction, constrained_json_schema

    prompts = _prompts(1, 1)
    llm = LLM(MODEL, dtype="float32", device="cpu")
    params = [SamplingParams(max_tokens=256, temperature=0.0, json_schema=constrained_json_schema(m))
              for m in (DocumentExtraction, AccountWindowSummary)]
    outs = llm.generate(prompts, params, progress=False)
    DocumentExtraction.model_validate_json(outs[0].outputs[0].text)
    AccountWindowSummary.model_validate_json(outs[1].outputs[0].text)
    assert torch.get_num_threads() >= 1
