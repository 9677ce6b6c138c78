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
    """Run the buckets' requests through the engine as one continuous stream (greedy, schema-constrained),
    validating each completion as it arrives, and yield each bucket's result as soon as its last item is in.

    The engine reads the next requests only as it has room (`LLM.stream`), so a bucket's last long answers decode
    beside the next bucket's first requests instead of in a shrinking batch, and only requests near their turn
    hold a grammar. A document's date, amount and account may only take values the text in its prompt prints
    (`pipeline.grounding`): each request's schema is built when the engine reads it. An engine failure costs the
    items it had read and not finished; the rest go on in a new stream. `progress` (optional) gets
    `.update(n_items, n_tokens)`."""
    order = [(b, i) for b, bucket in enumerate(buckets) for i in range(len(bucket.items))]
    results = [BucketResult(bucket.bucket_id, bucket.kind) for bucket in buckets]
    left = [len(bucket.items) for bucket in buckets]
    started: list[float | None] = [None] * len(buckets)
    params_cache: dict[tuple[str, int, tuple[str, ...]], Any] = {}
    done = 0  # requests of `order` the engine has read so far, over all streams
    yield from (_finish(results[b], None) for b in range(len(buckets)) if not left[b])  # nothing to run
    while done < len(order):
        base = done
        read: dict[int, tuple[int, int]] = {}  # this stream's index -> (bucket, item), read and not yet collected

        def requests() -> Iterator[tuple[list[int], Any]]:
            nonlocal done
            for k, (b, i) in enumerate(order[base:]):
                item = buckets[b].items[i]
                if started[b] is None:
                    started[b] = time.perf_counter()
                read[k] = (b, i)  # read before its schema is built: a schema that fails costs only this item
                done = base + k + 1
                yield item.prompt_token_ids, _item_params(item, params_cache)

        stream = llm.stream(requests())
        try:
            for out in stream:
                b, i = read[out.index]
                _collect(results[b], buckets[b].items[i], out, run_fields, llm.tokenizer)
                del read[out.index]  # only once collected: an item whose collection failed is an error row
                if progress is not None:
                    progress.update(1, len(out.outputs[0].token_ids))
                left[b] -= 1
                if not left[b]:
                    yield _finish(results[b], started[b])
        except Exception as exc:  # an engine failure costs the items it had read and not finished, not the run
            if done == base:  # it failed before reading any: the next item is charged, so the run moves on
                read, done = {0: order[base]}, base + 1
            for b, i in read.values():
                results[b].errors.extend(engine_errors([buckets[b].items[i]], f"{type(exc).__name__}: {exc}"))
                left[b] -= 1
                if progress is not None:
                    progress.update(1, 0)
                if not left[b]:
                    yield _finish(results[b], started[b])
        finally:
            stream.close()  # whatever it had not finished is given back before the next stream starts


def _item_params(item: WorkItem, cache: dict[tuple[str, int, tuple[str, ...]], Any]) -> Any:
    """A request's sampling parameters: a document's or section's narrowed to what its own text says; a window's
    schema depends only on which flag counts are non-zero, so one object per such set."""
    if item.unit.kind in ("document", "section"):
        return _params(item.unit.kind, item.max_tokens, item.visible_text)
    key = (item.unit.kind, item.max_tokens, tuple(supported_flags(item.unit.facts or {})))
    if key not in cache:
        cache[key] = _params(item.unit.kind, item.max_tokens, facts=item.unit.facts)
    return cache[key]


def _finish(res: BucketResult, started: float | None) -> BucketResult:
    res.seconds = time.perf_counter() - (started or time.perf_counter())
    return res


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
