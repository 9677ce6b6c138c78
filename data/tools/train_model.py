"""Train the demo extraction model (LlamaForCausalLM, ~3.7M parameters) on CPU, seeded.

Input: JSONL rows {"prompt", "answer"} from build_dataset.py and a tokenizer from
train_tokenizer.py. Each example is `encode(prompt).ids` (BOS from the post-processor) +
`encode(answer)` without specials + EOS; the loss covers only answer tokens. Batches are
formed from length-sorted examples under a token budget with right padding (causal
attention never looks at the pads, so no attention mask is needed); widths are padded to a
multiple of 32 so bf16 kernels see few distinct shapes.

What made it learn on 2 CPU cores (plain training sat on a loss plateau for 1,000+ steps
without copying anything):
- `--copy-init`: start from a hand-built copy circuit (copy_init.py: previous-token heads in
  layer 0, kept frozen, induction heads in layer 1), so continuing a value is solved from step 0;
- `--snippet-steps N`: a curriculum: early batches come, with falling probability, from
  shortened documents (only the lines that hold the gold values plus a few others); with fewer
  distractor positions, learning *where* each field starts is much faster.

    python data/tools/train_model.py --train data/build/train.jsonl --dev data/build/dev.jsonl \
        --out data/models/finextract-3m --copy-init --snippet-steps 1200 --steps 6000 --lr 1.5e-3 \
        --eval-every 1000 --threads 2
"""

import argparse
import json
import math
import random
import re
import sys
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

IGNORE = -100


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def encode_rows(tok: Tokenizer, rows: list[dict], eos: int, max_len: int) -> list[tuple[list[int], int]]:
    """(ids, prompt_len) per row; rows longer than max_len are dropped."""
    out = []
    for r in rows:
        p = tok.encode(r["prompt"]).ids
        a = tok.encode(r["answer"], add_special_tokens=False).ids + [eos]
        if len(p) + len(a) <= max_len:
            out.append((p + a, len(p)))
    return out


def copy_examples(tok: Tokenizer, rows: list[dict], eos: int, n: int, rng: random.Random) -> list[tuple[list[int], int]]:
    """Span-repeat sequences: '### Repeat:\\n' + span + '\\n### Copy:\\n' -> span + EOS."""
    head = tok.encode("### Repeat:\n").ids
    mid = tok.encode("\n### Copy:\n", add_special_tokens=False).ids
    pool = [tok.encode(r["prompt"], add_special_tokens=False).ids for r in rng.sample(rows, min(len(rows), 1500))]
    out = []
    for _ in range(n):
        ids = rng.choice(pool)
        span_len = rng.randint(8, 48)
        start = rng.randrange(max(1, len(ids) - span_len))
        span = ids[start:start + span_len]
        prompt = head + span + mid
        out.append((prompt + span + [eos], len(prompt)))
    return out


TITLE = re.compile(r"(?i)invoice|statement|kontoauszug|notice|review request|request for information|"
                   r"confirmation|contract note|initiation|update|review|preview")


def snippet_rows(rows: list[dict], rng: random.Random, keep: float = 0.1) -> list[dict]:
    """Short versions of document examples: only the lines that hold a gold value plus a few others.

    With ~60 instead of ~450 context tokens, attention to the right line carries a much larger
    share of the gradient at initialisation, so the copy circuit forms sooner (a curriculum).
    """
    from pipeline.plan.prompts import ANSWER_MARKER, DOCUMENT_INSTRUCTION, render_document_prompt  # noqa: PLC0415

    out = []
    for r in rows:
        if r["kind"] != "doc":
            continue
        gold = json.loads(r["answer"])
        body = r["prompt"][len(DOCUMENT_INSTRUCTION):-len(ANSWER_MARKER)]
        lines = body.split("\n")
        needles = [str(gold[k]) for k in ("issuer", "counterparty", "reference") if gold.get(k)]
        year = gold["date"][:4]
        digits = "".join(ch for ch in (gold.get("amount") or "") if ch.isdigit())
        acct = gold.get("account") or ""
        kept = []
        for line in lines:
            flat = line.replace(" ", "")
            dated = year in line and (re.search(r"(?i)date|issued|published", line) or rng.random() < 0.2)
            hit = (bool(TITLE.search(line)) or any(n in line for n in needles) or dated or (acct and acct in flat)
                   or (digits and digits in "".join(ch for ch in line if ch.isdigit())))
            if hit or rng.random() < keep:
                kept.append(line)
        out.append({**r, "prompt": render_document_prompt("\n".join(kept))})
    return out


PAD_MULTIPLE = 32  # few distinct tensor shapes: oneDNN bf16 kernels are built (slowly) once per shape


def _padded(n: int) -> int:
    return -(-n // PAD_MULTIPLE) * PAD_MULTIPLE


def make_batches(examples: list[tuple[list[int], int]], budget: int, rng: random.Random) -> list[list[int]]:
    """Index batches of similar length: padded width W (multiple of 32), batch size budget // W."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    batches: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        width = _padded(len(examples[i][0]))
        if cur and (width != _padded(len(examples[cur[-1]][0])) or len(cur) >= max(1, budget // width)):
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(examples: list[tuple[list[int], int]], idx: list[int], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = _padded(max(len(examples[i][0]) for i in idx))
    ids = torch.full((len(idx), width), pad, dtype=torch.long)
    labels = torch.full((len(idx), width), IGNORE, dtype=torch.long)
    for row, i in enumerate(idx):
        seq, plen = examples[i]
        ids[row, :len(seq)] = torch.tensor(seq)
        labels[row, plen:len(seq)] = torch.tensor(seq[plen:])
    return ids, labels


def answer_loss(model: LlamaForCausalLM, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over answer tokens only; the LM head runs only where a label exists
    (positions padded to a multiple of 256 so the head sees few distinct shapes)."""
    targets = labels[:, 1:].reshape(-1)
    pos = (targets != IGNORE).nonzero().squeeze(1)
    n = pos.numel()
    padded = torch.cat([pos, pos.new_zeros(-(-n // 256) * 256 - n)])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        hidden = model.model(input_ids=ids).last_hidden_state[:, :-1].reshape(-1, model.config.hidden_size)
        logits = model.lm_head(hidden[padded])[:n]
    return torch.nn.functional.cross_entropy(logits.float(), targets[pos])


@torch.no_grad()
def greedy_batch(model: LlamaForCausalLM, prompts: list[list[int]], eos: int, pad: int,
                 max_new: int = 160) -> list[list[int]]:
    """Left-padded batched greedy decoding with the HF KV cache (a quick dev metric)."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    out = model.generate(ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                         eos_token_id=eos, pad_token_id=pad)
    result = []
    for row in out[:, width:].tolist():
        result.append(row[:row.index(eos)] if eos in row else row)
    return result


def field_accuracy(model: LlamaForCausalLM, tok: Tokenizer, rows: list[dict], eos: int, pad: int) -> tuple[float, float]:
    """(field exact-match accuracy, fully exact fraction) of greedy answers on `rows`."""
    model.eval()
    hit = total = exact = 0
    gens = []
    for i in range(0, len(rows), 20):
        gens += greedy_batch(model, [tok.encode(r["prompt"]).ids for r in rows[i:i + 20]], eos, pad)
    for r, gen in zip(rows, gens):
        gold = json.loads(r["answer"])
        text = tok.decode(gen)
        try:
            pred = json.loads(text)
        except json.JSONDecodeError:
            pred = {}
        ok = [pred.get(k, "<missing>") == v for k, v in gold.items()] if isinstance(pred, dict) else [False] * len(gold)
        hit += sum(ok)
        total += len(ok)
        exact += all(ok)
    model.train()
    return hit / max(total, 1), exact / max(len(rows), 1)


def build_model(tok: Tokenizer, args: argparse.Namespace) -> LlamaForCausalLM:
    cfg = LlamaConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=args.hidden, intermediate_size=args.hidden * 3,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        max_position_embeddings=2048, rope_theta=args.rope_theta, rms_norm_eps=1e-5, tie_word_embeddings=True,
        bos_token_id=tok.token_to_id("<s>"), eos_token_id=tok.token_to_id("</s>"),
        pad_token_id=tok.token_to_id("<pad>"), attention_bias=False, mlp_bias=False,
        initializer_range=0.02, torch_dtype="float32",
    )
    return LlamaForCausalLM(cfg)


def save(model: LlamaForCausalLM, out: Path, meta: dict) -> None:
    model.generation_config = GenerationConfig(
        bos_token_id=model.config.bos_token_id, eos_token_id=model.config.eos_token_id,
        pad_token_id=model.config.pad_token_id, do_sample=False, max_new_tokens=256)
    model.save_pretrained(out, safe_serialization=True)
    cfg_path = out / "config.json"  # older transformers read a top-level rope_theta (default 10000)
    cfg = json.loads(cfg_path.read_text())
    cfg.setdefault("rope_theta", float((cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)))
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    (out / "training_meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def lr_at(step: int, args: argparse.Namespace) -> float:
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=Path, required=True)
    ap.add_argument("--dev", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True, help="model dir holding tokenizer.json")
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--tokens-per-step", type=int, default=4000)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--copy-steps", type=int, default=0)
    ap.add_argument("--copy-tokens", type=int, default=1000)
    ap.add_argument("--max-len", type=int, default=1536)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--dev-size", type=int, default=40)
    ap.add_argument("--snippet-steps", type=int, default=0,
                    help="curriculum: before this step, batches come from short document snippets with falling probability")
    ap.add_argument("--copy-init", action="store_true", help="start from a hand-built copy circuit (copy_init.py)")
    ap.add_argument("--rope-theta", type=float, default=1e6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    tok = Tokenizer.from_file(str(args.out / "tokenizer.json"))
    eos, pad = tok.token_to_id("</s>"), tok.token_to_id("<pad>")
    train_rows = [json.loads(x) for x in args.train.open(encoding="utf-8")]
    dev_rows = [json.loads(x) for x in args.dev.open(encoding="utf-8")]
    dev_rows = [r for r in dev_rows if r["kind"] == "doc"][: args.dev_size * 3 // 4] + \
               [r for r in dev_rows if r["kind"] == "window"][: args.dev_size // 4]
    examples = encode_rows(tok, train_rows, eos, args.max_len)
    n_tok = sum(len(e[0]) for e in examples)
    log(f"{len(examples)}/{len(train_rows)} examples, {n_tok} tokens, mean {n_tok / len(examples):.0f}")
    copies = copy_examples(tok, train_rows, eos, 20000, rng)
    snippets = encode_rows(tok, snippet_rows(train_rows, rng), eos, args.max_len) if args.snippet_steps else []
    if snippets:
        log(f"{len(snippets)} snippet examples, mean {sum(len(e[0]) for e in snippets) / len(snippets):.0f} tokens")

    model = build_model(tok, args)
    if args.copy_init:
        import copy_init  # noqa: PLC0415 - sibling script module

        copy_init.apply_copy_circuit(model, seed=args.seed)
        for p in model.model.layers[0].self_attn.parameters():  # keep the previous-token heads intact
            p.requires_grad_(False)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model {n_params / 1e6:.2f}M parameters; args {vars(args)}")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and p.requires_grad]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 and p.requires_grad]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    model.train()
    batches: list[list[int]] = []
    copy_batches: list[list[int]] = []
    snippet_batches: list[list[int]] = []
    t0 = time.time()
    seen_tokens = 0
    ema = None
    for step in range(args.steps):
        source = examples
        if step < args.snippet_steps and rng.random() < 1.0 - step / args.snippet_steps:
            if not snippet_batches:
                snippet_batches = make_batches(snippets, args.tokens_per_step, rng)
            idx, source = snippet_batches.pop(), snippets
        else:
            if not batches:
                batches = make_batches(examples, args.tokens_per_step, rng)
            idx = batches.pop()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        ids, labels = collate(source, idx, pad)
        loss = answer_loss(model, ids, labels)
        total = loss
        if step < args.copy_steps:
            if not copy_batches:
                copy_batches = make_batches(copies, args.copy_tokens, rng)
            cids, clabels = collate(copies, copy_batches.pop(), pad)
            total = total + 0.5 * answer_loss(model, cids, clabels)
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        seen_tokens += ids.numel()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 10 == 0:
            el = time.time() - t0
            log(f"step {step} loss {loss.item():.4f} ema {ema:.4f} lr {lr_at(step, args):.2e} "
                f"bs {len(idx)}x{ids.size(1)} {seen_tokens / el:.0f} tok/s elapsed {el / 60:.1f}m")
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            acc, exact = field_accuracy(model, tok, dev_rows, eos, pad)
            el = time.time() - t0
            log(f"DEV step {step + 1} field_acc {acc:.4f} exact {exact:.4f} elapsed {el / 60:.1f}m")
            save(model, args.out, {"step": step + 1, "dev_field_accuracy": acc, "dev_exact": exact,
                                   "train_minutes": round(el / 60, 1), "args": {k: str(v) for k, v in vars(args).items()},
                                   "parameters": n_params})
    log(f"done in {(time.time() - t0) / 60:.1f} min")


if __name__ == "__main__":
    sys.exit(main())
