"""Inference in this process: each planned bucket streamed through one engine, every completion validated as it
arrives. The Ray executor (`pipeline.infer.ray_executor`) runs the same function on its actors."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from engine import SamplingParams
from pipeline.errors import ErrorRecord, Stage, Unit
from pipeline.grounding.windows import supported_flags
from pipeline.infer.validate import decoding_schema, validate_completion
from pipeline.output.datasets import output_row
from pipeline.plan.bucketing import Bucket, WorkItem


@dataclass
class BucketResult:
    """Validated rows and error rows of one bucket, plus what it cost."""

    bucket_id: str
    kind: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    seconds: float = 0.0
    # per request: time to first token, time per output token after it, end to end (seconds; None where the
    # request has no such span), measured from its submission to the engine
    latencies: list[tuple[float | None, float | None, float | None]] = field(default_factory=list)


def _params(kind: str, max_tokens: int, document_text: str | None = None,
            facts: dict[str, object] | None = None) -> Any:
    return SamplingParams(max_tokens=max_tokens, temperature=0.0,
                          json_schema=decoding_schema(kind, document_text, facts),
                          logprobs=0 if kind == "document" else None)


def infer(llm: Any, buckets: list[Bucket], *, run_fields: dict[str, str], progress: Any = None) -> Iterator[BucketResult]:
    """Run buckets through the engine one at a time (greedy, schema-constrained), validating each
    completion as it streams in. A document's date, amount and account may only take values the
    text in its prompt prints (`pipeline.grounding`). `progress` (optional) gets `.update(n_items, n_tokens)`."""
    params_cache: dict[tuple[str, int, tuple[str, ...]], Any] = {}
    for bucket in buckets:
        t0 = time.perf_counter()
        res = BucketResult(bucket.bucket_id, bucket.kind)
        params = []
        for item in bucket.items:
            if item.unit.kind in ("document", "section"):  # narrowed to what its own text says
                params.append(_params(item.unit.kind, item.max_tokens, item.visible_text))
                continue
            # a window's schema depends only on which flag counts are non-zero: one params object per such set
            key = (item.unit.kind, item.max_tokens, tuple(supported_flags(item.unit.facts or {})))
            if key not in params_cache:
                params_cache[key] = _params(item.unit.kind, item.max_tokens, facts=item.unit.facts)
            params.append(params_cache[key])
        pending = dict(enumerate(bucket.items))
        try:
            for out in llm.generate_stream([i.prompt_token_ids for i in bucket.items], params, progress=False):
                _collect(res, pending[out.index], out, run_fields, llm.tokenizer)
                del pending[out.index]  # only once collected: an item whose collection failed is an error row
                if progress is not None:
                    progress.update(1, len(out.outputs[0].token_ids))
        except Exception as exc:  # an engine failure costs this bucket's unfinished items, not the run
            res.errors.extend(engine_errors(list(pending.values()), f"{type(exc).__name__}: {exc}"))
            if progress is not None:
                progress.update(len(pending), 0)
        res.seconds = time.perf_counter() - t0
        yield res


def engine_errors(items: list[WorkItem], message: str) -> list[ErrorRecord]:
    """One EngineError row per item the engine could not finish."""
    return [ErrorRecord(row_id=i.unit.row_id, unit=Unit.of_request(i.unit.kind),
                        source_file=i.unit.source_file, stage=Stage.INFER, error_class="EngineError", message=message,
                        n_rows=i.unit.n_rows) for i in items]


def _collect(res: BucketResult, item: WorkItem, out: Any, run_fields: dict[str, str], tokenizer: Any = None) -> None:
    u = item.unit
    sample = out.outputs[0]  # one sample per request (greedy)
    res.prompt_tokens += item.n_tokens
    res.output_tokens += len(sample.token_ids)
    metrics = getattr(out, "metrics", None)
    res.cached_tokens += int(getattr(metrics, "num_cached_tokens", 0) or 0)
    if metrics is not None:  # an engine's metrics carry the spans; other executors' outputs may not
        res.latencies.append(tuple(getattr(metrics, k, None) for k in ("ttft", "tpot", "e2e")))  # type: ignore[arg-type]
    verdict = validate_completion(kind=u.kind, row_id=u.row_id, source_file=u.source_file, n_rows=u.n_rows,
                                  text=sample.text, finish_reason=sample.finish_reason, error=out.error,
                                  max_tokens=item.max_tokens)
    if isinstance(verdict, ErrorRecord):
        res.errors.append(verdict)
    else:
        res.rows.append(output_row(item, verdict, sample, run_fields, tokenizer))
