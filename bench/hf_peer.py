"""HF transformers `generate`, batches of 4, as the naive baseline engine of the real workload: the same pipeline
run, the same prompt token ids, the same JSON schemas (enforced by the engine's own llguidance grammar as a logits
processor, so the baseline answers in the schema as the engine does).

    python -m bench.hf_peer -- --input DIR --output OUT       # a `pipeline run` whose engine is HF generate b4

The weights are those the engine runs: the default model's adapter merged into its base
(`engine.export_hf_checkpoint`), exported once under the cache folder.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from bench.baselines import left_padded
from bench.peer_engine import PeerEngine, run_pipeline_with, split_args
from engine import CompletionOutput, RequestMetrics, RequestOutput

BATCH_SIZE = 4


class _GrammarMask:
    """A transformers logits processor applying each row's JSON-schema grammar (None: that row is free)."""

    def __init__(self, backend: Any, matchers: list[Any], prompt_len: int) -> None:
        self.backend, self.matchers, self.prompt_len = backend, matchers, prompt_len
        self.done = [False] * len(matchers)
        self.finished_at: list[int | None] = [None] * len(matchers)  # generated tokens when the grammar completed
        self.mask = backend.allocate_mask(len(matchers))

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        rows = []
        for r, m in enumerate(self.matchers):
            if m is None or self.done[r]:
                continue
            if input_ids.shape[1] > self.prompt_len:  # the token chosen last step
                tok = int(input_ids[r, -1])
                if tok in self.backend.eos_token_ids:  # this row ended; HF pads it from here
                    self.done[r] = True
                    continue
                m.accept(tok)  # the mask allowed it
                if m.is_finished():  # the JSON is complete: the engine ends the request here, without an EOS;
                    # the mask now allows only EOS, so HF ends the row at the next step
                    self.finished_at[r] = input_ids.shape[1] - self.prompt_len
            m.fill_allowed(self.mask, r)
            rows.append(r)
        if rows:
            sub = self.mask[rows]
            self.backend.apply_mask(scores, sub, rows)
        return scores


class HFGenerateLLM(PeerEngine):
    """HF `generate` (greedy, left-padded batches of `batch_size` in the order given) driven like the engine."""

    def __init__(self, model: str | Path, cache_dir: Path, dtype: str = "float32", batch_size: int = BATCH_SIZE,
                 threads: int | None = None) -> None:
        # lazy: transformers and the engine's exporter load only for a baseline run
        from transformers import AutoModelForCausalLM

        # lazy: as above
        from engine import export_hf_checkpoint
        from engine.models.checkpoint import open_checkpoint
        from engine.registry import model_parts
        from engine.structured import StructuredOutputBackend

        base, adapter = model_parts(model)
        hf_dir = cache_dir / f"{Path(model).name}-hf-{dtype}"
        if not (hf_dir / "config.json").is_file():
            export_hf_checkpoint(base, hf_dir, dtype=dtype, adapter=adapter)
        if threads:
            torch.set_num_threads(threads)
        t0 = time.perf_counter()
        self.model = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=getattr(torch, dtype)).eval()
        self.load_s = time.perf_counter() - t0
        ckpt = open_checkpoint(base)
        self.tokenizer = ckpt.tokenizer
        self.max_model_len = int(ckpt.config.max_position_embeddings)
        self.eos = list(ckpt.eos_token_ids)
        self.backend = StructuredOutputBackend(self.tokenizer.to_json(), ckpt.config.vocab_size, self.eos)
        self.batch_size, self.dtype, self.model_name = batch_size, dtype, str(model)
        self._stats = {"requests": 0, "prompt_tokens": 0, "output_tokens": 0, "generate_s": 0.0}

    def config_summary(self) -> dict[str, Any]:
        return {"engine": "hf generate", "batch_size": self.batch_size, "model_dir": self.model_name,
                "max_model_len": self.max_model_len, "device": "cpu", "dtype": self.dtype}

    def stats(self) -> dict[str, Any]:
        return dict(self._stats)

    def close(self) -> None:
        self.model = None  # the weights go with the run

    def _batch(self, idx: list[int], prompts: list[list[int]], params: list[Any]) -> list[RequestOutput]:
        arrival = time.monotonic()
        ids, attn = left_padded(prompts, "cpu")
        width = ids.shape[1]
        matchers = [self.backend.new_matcher(p.json_schema) if getattr(p, "json_schema", None) else None
                    for p in params]
        mask = _GrammarMask(self.backend, matchers, width)
        new = max(int(p.max_tokens) for p in params)
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=attn, max_new_tokens=new, do_sample=False,
                                      eos_token_id=self.eos, pad_token_id=self.eos[0], logits_processor=[mask])
        finish = time.monotonic()
        results = []
        for r, (i, p) in enumerate(zip(idx, params)):
            gen = out[r, width:].tolist()
            stop = next((k for k, t in enumerate(gen) if t in self.eos), None)
            if mask.finished_at[r] is not None:  # the schema's JSON complete
                tokens, reason = gen[: mask.finished_at[r]], "stop"
            elif stop is not None and stop < int(p.max_tokens):  # EOS kept, as the engine keeps it
                tokens, reason = gen[: stop + 1], "stop"
            else:
                tokens, reason = gen[: int(p.max_tokens)], "length"
            metrics = RequestMetrics(arrival_time=arrival, finish_time=finish, num_prompt_tokens=len(prompts[r]),
                                     num_output_tokens=len(tokens))
            results.append(RequestOutput(index=i, prompt_token_ids=list(prompts[r]), error=None, metrics=metrics,
                                         outputs=[CompletionOutput(index=0, text=self.tokenizer.decode(tokens),
                                                                   token_ids=tokens, finish_reason=reason)]))
            self._stats["prompt_tokens"] += len(prompts[r])
            self._stats["output_tokens"] += len(tokens)
        self._stats["requests"] += len(idx)
        return results

    def generate_stream(self, prompts: Sequence[Sequence[int]], params: Any, progress: bool = False
                        ) -> Iterator[RequestOutput]:
        del progress
        plist = list(params) if isinstance(params, Sequence) else [params] * len(prompts)
        t0 = time.perf_counter()
        try:
            for start in range(0, len(prompts), self.batch_size):
                idx = list(range(start, min(start + self.batch_size, len(prompts))))
                yield from self._batch(idx, [list(prompts[i]) for i in idx], [plist[i] for i in idx])
        finally:
            self._stats["generate_s"] += time.perf_counter() - t0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.hf_peer [--dtype D] [--cache DIR] -- <pipeline run arguments>`."""
    split = split_args(sys.argv[1:] if argv is None else argv,
                       "python -m bench.hf_peer [--dtype D] [--cache DIR] -- <pipeline run arguments>")
    if split is None:
        return 2
    opts = dict(zip(split[0][::2], split[0][1::2]))
    cache, dtype = Path(opts.get("--cache", "bench-out/hf-peer")), opts.get("--dtype", "float32")
    return run_pipeline_with(lambda model, **_engine_kwargs: HFGenerateLLM(model, cache, dtype=dtype), split[1])


if __name__ == "__main__":
    raise SystemExit(main())
