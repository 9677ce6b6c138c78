"""Fine-tune SmolLM2-135M-Instruct for extraction with LoRA, on this 2-core CPU, within a time budget.

    python data/tools/finetune_smollm2.py --minutes 60 --out data/adapters/finextract-smollm2

Corpus (seeded, generated; never the real invoices of ../shared/realdata, which are the development set):
~60% multilingual invoices and credit notes (`invoices_ml.py`), ~25% the demo corpus' five document types
(rendered to PDF and read back with the pipeline's own text path), ~15% account windows. Each example is the
exact prompt `pipeline run` sends (`pipeline.plan.prompts.encode_prompt`, the model's chat template) followed by the
compact JSON answer and the end-of-turn token; loss on the answer only.

Why LoRA on the upper half of the layers: on this CPU a step costs one forward pass plus the backward pass down to
the lowest adapted layer, so adapting layers 15-29 of 30 trains ~1.5x more examples per hour than adapting all of
them, and the task (choose and copy spans the prompt already holds; the decoder's grammar limits the choice to
printed values) is one of reading out, which the upper layers do. The adapter is ~10 MB in float32.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SEED = 1919  # the synthetic eval set (data/eval) uses seed 2
MAX_PROMPT_TOKENS = 900


def _doc_text_from_pdf(pdf: bytes) -> str:
    from pypdf import PdfReader

    from pipeline.ingest.pdf_text import document_text, page_texts

    return document_text(page_texts(PdfReader(io.BytesIO(pdf))))


def build_examples(n: int, seed: int = SEED, window_share: float = 0.15) -> list[dict[str, object]]:
    """(kind, text or facts, answer JSON) records, shuffled; `window_share` of them account windows, 60% of the
    rest multilingual invoices."""
    from data.tools import docs, invoices_ml, transactions
    from pipeline.plan.windows import reference_summary, window_facts
    from schemas import AccountWindowSummary, DocumentExtraction, to_compact_json

    rng = random.Random(seed)
    n_win = int(n * window_share)
    n_inv = int((n - n_win) * 0.6 / 0.85)
    out: list[dict[str, object]] = []
    for _ in range(n_inv):
        ex = invoices_ml.invoice(rng)
        out.append({"kind": "document", "text": ex.text,
                    "answer": to_compact_json(DocumentExtraction.model_validate(ex.gold))})
    types = list(docs.BUILDERS)
    for i in range(n - n_inv - n_win):
        doc = docs.BUILDERS[types[i % len(types)]](rng)
        if doc.image_only:
            continue
        out.append({"kind": "document", "text": _doc_text_from_pdf(doc.pdf),
                    "answer": to_compact_json(DocumentExtraction.model_validate(doc.gold))})
    windows: list[dict[str, object]] = []
    while len(windows) < n_win:
        for facts in window_facts(transactions.to_table(transactions.account_transactions(rng))):
            windows.append({"kind": "window", "facts": facts,
                            "answer": to_compact_json(AccountWindowSummary.model_validate(reference_summary(facts)))})
    out += windows[:n_win]
    rng.shuffle(out)
    return out


def tokenize(examples: list[dict[str, object]], tok) -> list[tuple[list[int], list[int]]]:
    from pipeline.plan.prompts import encode_prompt

    eos = tok.eos_token_id
    pairs = []
    for ex in examples:
        if ex["kind"] == "window":
            prompt = encode_prompt(tok, "window", facts=ex["facts"])
        else:
            text = str(ex["text"])
            prompt = encode_prompt(tok, "document", text=text)
            while len(prompt) > MAX_PROMPT_TOKENS and len(text) > 200:
                text = text[: int(len(text) * 0.85)]
                prompt = encode_prompt(tok, "document", text=text)
        answer = tok.encode(str(ex["answer"]), add_special_tokens=False) + [eos]
        pairs.append((prompt, answer))
    return pairs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="smollm2-135m-instruct", help="registered model name, .gguf or HF directory")
    ap.add_argument("--out", default=str(ROOT / "data" / "adapters" / "finextract-smollm2"))
    ap.add_argument("--minutes", type=float, default=60.0, help="training time budget")
    ap.add_argument("--examples", type=int, default=4000, help="examples generated (more than the budget uses)")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--first-layer", type=int, default=15, help="adapt this layer and the ones above it")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--accum", type=int, default=4, help="examples per optimizer step")
    ap.add_argument("--save-every", type=float, default=10.0, help="minutes between adapter checkpoints")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--resume", default=None, help="continue training this adapter directory")
    ap.add_argument("--seed", type=int, default=SEED, help="corpus seed (use a new one when resuming)")
    ap.add_argument("--window-share", type=float, default=0.15, help="share of account-window examples")
    args = ap.parse_args()

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from engine import export_hf_checkpoint, load_tokenizer
    from pipeline.models import resolve_model

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    base = resolve_model(args.base)
    hf_dir = base
    if base.is_file():
        hf_dir = ROOT / "data" / "build" / "smollm2-hf"
        if not (hf_dir / "config.json").is_file():
            export_hf_checkpoint(base, hf_dir)
    tok = load_tokenizer(hf_dir)
    t0 = time.perf_counter()
    pairs = tokenize(build_examples(args.examples, args.seed, args.window_share), tok)
    print(f"{len(pairs)} examples, mean {sum(len(p) + len(a) for p, a in pairs) / len(pairs):.0f} tokens "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)

    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    n_layers = model.config.num_hidden_layers
    config = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.0, bias="none",
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                        layers_to_transform=list(range(args.first_layer, n_layers)))
    if args.resume:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, args.resume, is_trainable=True)
    else:
        model = get_peft_model(model, config)
    model.print_trainable_parameters()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    out = Path(args.out)
    log = []
    budget = args.minutes * 60
    start = last_save = time.perf_counter()
    step, seen, running = 0, 0, None
    model.train()
    for i, (prompt, answer) in enumerate(pairs * 10):
        elapsed = time.perf_counter() - start
        if elapsed > budget:
            break
        frac = elapsed / budget
        lr = args.lr * min(1.0, (step + 1) / 10) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        ids = torch.tensor([prompt + answer])
        labels = torch.tensor([[-100] * len(prompt) + answer])
        loss = model(input_ids=ids, labels=labels).loss
        (loss / args.accum).backward()
        running = loss.item() if running is None else 0.98 * running + 0.02 * loss.item()
        seen += 1
        if seen % args.accum == 0:
            for g in opt.param_groups:
                g["lr"] = lr
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step % 10 == 0:
                print(f"step {step} examples {seen} loss {running:.4f} lr {lr:.2e} {elapsed / 60:.1f} min", flush=True)
                log.append({"step": step, "examples": seen, "loss": round(running, 5), "minutes": round(elapsed / 60, 2)})
        if time.perf_counter() - last_save > args.save_every * 60:
            _save(model, out, log, args, seen)
            last_save = time.perf_counter()
    _save(model, out, log, args, seen)
    print(f"done: {seen} examples, {step} steps in {(time.perf_counter() - start) / 60:.1f} min -> {out}")
    return 0


def _save(model, out: Path, log: list, args: argparse.Namespace, seen: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    # The base is named as the pipeline resolves it (a registry name), not by the temporary export it trained on.
    cfg_path = out / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["base_model_name_or_path"] = args.base
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    (out / "training.json").write_text(json.dumps({
        "base": args.base, "seed": args.seed, "resumed_from": args.resume, "rank": args.rank, "first_layer": args.first_layer, "lr": args.lr,
        "accum": args.accum, "window_share": args.window_share, "examples_seen": seen, "log": log}, indent=1) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
