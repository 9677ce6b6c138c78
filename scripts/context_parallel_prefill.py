"""Prefill of one long document on 1, 2, 4 context-parallel ranks: wall time and KV memory per rank.

    .venv/bin/python scripts/context_parallel_prefill.py --model smollm2-135m-instruct \
        --file ../shared/realdata/financial_text/edgartools_Apple_10-K.md --ranks 1,2,4

The document's text is tokenised and cut to the model's positions (minus one for the sampled token); every run
prefills it in one step (the token budget is the prompt's length) and samples one token, which must be the same
for every N. KV memory per rank is the peak of blocks that rank held times the bytes of one block.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import LLM, SamplingParams  # noqa: E402
from engine.kv_pool import kv_bytes_per_token  # noqa: E402
from pipeline.models import resolve_model  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--file", required=True, type=Path)
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--tokens", type=int, default=None, help="prompt tokens (default: the model's positions - 1)")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--repeats", type=int, default=2, help="prefills per N (the best is reported)")
    args = ap.parse_args()
    model = str(resolve_model(args.model))
    text = args.file.read_text(errors="replace")
    rows = []
    for n in [int(x) for x in args.ranks.split(",")]:
        if n > 1:
            torch.set_num_threads(max(1, torch.get_num_threads() // n) if n <= 2 else 1)
        probe = LLM(model, dtype=args.dtype, max_num_seqs=1) if not rows else None
        if probe is not None:
            limit = args.tokens or probe.max_model_len - 1
            ids = probe.tokenizer.encode(text)[:limit]
            del probe
        llm = LLM(model, dtype=args.dtype, max_num_seqs=1, max_num_batched_tokens=len(ids),
                  enable_prefix_caching=False, context_parallel_size=n)
        best, token = float("inf"), None
        for _ in range(args.repeats):
            t = time.perf_counter()
            out = llm.generate([ids], SamplingParams(max_tokens=1), progress=False)[0]
            best = min(best, time.perf_counter() - t)
            token = out.outputs[0].token_ids
        stats = llm.stats()
        block_bytes = llm.config.block_size * kv_bytes_per_token(llm.model_config, llm.dtype, False)
        per_rank = stats.get("kv_blocks_peak_used_by_rank", [stats["kv_blocks_peak_used"]])
        rows.append({"ranks": n, "prompt_tokens": len(ids), "prefill_s": round(best, 3), "token": token,
                     "kv_mib_per_rank": [round(b * block_bytes / 2**20, 1) for b in per_rank],
                     "dtype": str(llm.dtype).replace("torch.", ""), "threads_rank0": torch.get_num_threads()})
        llm.close()
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]
    for r in rows:
        r["speedup_vs_first"] = round(base["prefill_s"] / r["prefill_s"], 2)
        r["kv_share_of_first"] = round(max(r["kv_mib_per_rank"]) / max(base["kv_mib_per_rank"]), 3)
    print(json.dumps(rows, indent=1))
    if len({tuple(r["token"]) for r in rows}) != 1:
        sys.exit("the sampled token differs between rank counts")


if __name__ == "__main__":
    main()
