"""Checks the engine on a real GGUF model against transformers and llama.cpp, and writes a JSON report.

    .venv/bin/python scripts/check_real_model.py [--model smollm2-135m-instruct] [--out report.json]

1. float32 greedy parity with transformers' own GGUF loader (independent dequantization and Q/K handling) on
   chat prompts: general questions and the pipeline's own extraction prompts over the sample PDFs;
2. int8 weights and bf16 against the engine's float32 tokens (identical outputs, first divergence, and greedy
   top-1 agreement at every position when fed the float32 tokens);
3. tokenizer ids against llama.cpp (when llama-cpp-python is installed).
transformers' GGUF loader needs `accelerate` (a dev extra).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import LLM, SamplingParams  # noqa: E402
from pipeline.models import resolve_model  # noqa: E402
from pipeline.plan.prompts import document_messages  # noqa: E402

QUESTIONS = ["What is the capital of France?", "Write one sentence about invoices.", "Name three colours.",
             "What does IBAN stand for?"]
MAX_TOKENS = 48


def _prompts(llm: LLM) -> list[list[int]]:
    from pypdf import PdfReader

    from pipeline.ingest.pdf_text import document_text, page_texts

    convs = [[{"role": "user", "content": q}] for q in QUESTIONS]
    for name in ("invoice.pdf", "bank_statement_2_pages.pdf", "kyc_notice.pdf", "trade_confirmation.pdf"):
        text = document_text(page_texts(PdfReader(Path("data/samples") / name)))
        convs.append(document_messages(text))
    return [llm.tokenizer.encode_chat(c) for c in convs]


def _agreement(a: list[list[int]], b: list[list[int]]) -> dict:
    first = []
    for x, y in zip(a, b):
        n = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), None)
        first.append(n if n is not None else (None if len(x) == len(y) else min(len(x), len(y))))
    return {"identical": sum(x == y for x, y in zip(a, b)), "of": len(a), "first_divergence": first}


def _teacher_forced(llm: LLM, prompts: list[list[int]], ref: list[list[int]]) -> dict:
    """Share of positions where `llm`'s greedy next token equals the float32 one, each fed the float32 prefix
    (one 1-token request per position; the prefix cache makes the shared prefixes cheap). Whole-output identity
    hides how close two precisions are: one early flip changes everything after it."""
    requests = [p + r[:i] for p, r in zip(prompts, ref) for i in range(len(r))]
    want = [t for r in ref for t in r]
    got = [o.outputs[0].token_ids[0] if o.outputs[0].token_ids else -1
           for o in llm.generate(requests, SamplingParams(max_tokens=1, ignore_eos=True), progress=False)]
    same = sum(a == b for a, b in zip(got, want))
    return {"positions": len(want), "top1_agree": same, "share": round(same / len(want), 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--out", default=None)
    ap.add_argument("--skip-bf16", action="store_true", help="bf16 is very slow on CPUs without bf16 instructions")
    args = ap.parse_args()
    path = resolve_model(args.model)
    report: dict = {"model": str(path), "max_tokens": MAX_TOKENS}
    params = SamplingParams(max_tokens=MAX_TOKENS)
    t = time.perf_counter()
    f32 = LLM(str(path), dtype="float32")
    report["load_s_float32"] = round(time.perf_counter() - t, 2)
    prompts = _prompts(f32)
    report["prompt_tokens"] = [len(p) for p in prompts]
    ours = [o.outputs[0].token_ids for o in f32.generate(prompts, params, progress=False)]
    report["float32_texts"] = [f32.tokenizer.decode(o) for o in ours]
    report["float32_teacher_forced_self_check"] = _teacher_forced(f32, prompts, ours)

    import transformers

    hf = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                          dtype=torch.float32).eval()
    eos = f32.eos_token_ids
    with torch.inference_mode():
        refs = []
        for p in prompts:
            out = hf.generate(torch.tensor([p]), max_new_tokens=MAX_TOKENS, do_sample=False, eos_token_id=eos,
                              pad_token_id=eos[0])[0, len(p):].tolist()
            refs.append(out)
    report["float32_vs_transformers_gguf"] = _agreement(ours, refs)
    del hf

    t = time.perf_counter()
    q = LLM(str(path), dtype="float32", quantization="int8")
    report["load_s_int8"] = round(time.perf_counter() - t, 2)
    report["int8_vs_float32"] = _agreement([o.outputs[0].token_ids for o in q.generate(prompts, params, progress=False)], ours)
    report["int8_teacher_forced"] = _teacher_forced(q, prompts, ours)
    del q
    if not args.skip_bf16:
        t = time.perf_counter()
        b = LLM(str(path), dtype="bfloat16")
        report["bf16_vs_float32"] = _agreement([o.outputs[0].token_ids for o in b.generate(prompts, params, progress=False)], ours)
        report["bf16_teacher_forced"] = _teacher_forced(b, prompts, ours)
        report["bf16_seconds"] = round(time.perf_counter() - t, 1)
    try:
        import llama_cpp

        from tests.test_gguf_tokenizer import TEXTS

        lc = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        texts = [t for t in TEXTS + QUESTIONS if t]
        same = sum(f32.tokenizer.encode(t) == lc.tokenize(t.encode(), add_bos=False, special=True) for t in texts)
        report["tokenizer_vs_llama_cpp"] = {"identical": same, "of": len(texts)}
    except ImportError:
        report["tokenizer_vs_llama_cpp"] = "llama-cpp-python not installed"
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
