"""The pipeline stages as Prefect tasks, and `prefect_stages()` which hands them to `run_pipeline`.

    task               wraps (pipeline.run)        retries        cache
    ingest             ingest                      2              none (see below)
    load-model         EngineCache.load            1              none; loaded engines are kept (below)
    prepare-requests   prepare_requests            0              none (cheap; its inputs are large)
    infer-<bucket id>  infer, one bucket per run   2 (+ engine)   none: pipeline staging resumes per bucket
    write-partition    write_run                   3              none (commit + idempotent publish)

The model is loaded once per process: the flow process owns one `pipeline.models.EngineCache` (`ENGINES`), which
keeps an engine per (model dir, engine settings). Under `flow.serve` or a worker every flow run is its own
process, so a nightly run (or a whole backfill) loads the model once, not once per task.

Large arguments are passed wrapped in `quote` so Prefect does not walk them for dependencies. No task's result
is persisted: Prefect's result storage (pickles under PREFECT_HOME, kept with no expiry) would hold document texts
and transaction rows, which a bank's retention rules do not allow outside the pipeline's own output, and a large
log's spooled rows live in a temporary folder a cached result would outlive. What Prefect keeps is run and task
states, parameters (paths, dates, options), logs and the run's markdown artifact. A re-run skips the units already
in the output (pipeline.run); it reads its inputs again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext
from prefect.utilities.annotations import quote

from pipeline.infer.in_process import BucketResult, infer
from pipeline.ingest import IngestLimits, IngestResult, ingest
from pipeline.ingest.profiles import BankProfile
from pipeline.models import EngineCache
from pipeline.output.sink import Staging
from pipeline.plan.bucketing import Bucket, PreparedRequests
from pipeline.run import Stages, prepare_requests, write_run

ENGINE_ERROR_CLASS = "EngineError"  # error_class `pipeline.infer.in_process.infer` gives items lost to an engine exception


class TransientEngineFailure(RuntimeError):
    """The engine raised mid-bucket; the bucket is retried before its items become error rows."""


@task(name="ingest", retries=2, retry_delay_seconds=[5, 30], cache_policy=NO_CACHE, persist_result=False)
def ingest_task(input_dir: Path, *, limit: int | None = None, default_currency: str | None = None,
                exclude: tuple[Path, ...] = (), exclude_globs: tuple[str, ...] = (),
                limits: IngestLimits | None = None, progress: bool = False,
                bank_profiles: tuple[BankProfile, ...] | None = None, ocr_cache: Path | None = None) -> IngestResult:
    """Input folder -> Arrow tables (not persisted by Prefect: see the module's docstring)."""
    result = ingest(input_dir, limit=limit, default_currency=default_currency, exclude=(*exclude, *exclude_globs),
                    limits=limits, progress=progress, bank_profiles=bank_profiles, ocr_cache=ocr_cache)
    get_run_logger().info("ingested %d files: %d documents, %d transaction rows, %d file/row errors",
                          result.files.num_rows, result.documents.num_rows, result.transactions.num_rows,
                          result.errors.num_rows)
    return result


# The flow process's engines: the orchestrator is the caller that runs many pipeline runs in one process.
ENGINES = EngineCache()


@task(name="load-model", retries=1, retry_delay_seconds=10, cache_policy=NO_CACHE, persist_result=False)
def load_model_task(model_dir: Path, engine_kwargs: dict[str, Any]) -> Any:
    """The engine for this model and config, loaded on first use in this process."""
    return ENGINES.load(model_dir, **engine_kwargs)


@task(name="prepare-requests", cache_policy=NO_CACHE, persist_result=False)
def prepare_task(units: list[Any], tokenizer: Any, max_model_len: int, max_tokens: dict[str, int],
                 bucket_size: int, bucket_tokens: int, section_tokens: int) -> PreparedRequests:
    """Work units -> exact token ids, length buckets (a filing -> its sections' requests)."""
    prepared = prepare_requests(units, tokenizer, max_model_len, max_tokens, bucket_size, bucket_tokens,
                                section_tokens)
    get_run_logger().info("%d requests in %d buckets, %d prepare errors", prepared.n_items, len(prepared.buckets),
                          len(prepared.errors))
    return prepared


@task(name="infer", retries=2, retry_delay_seconds=[5, 30], cache_policy=NO_CACHE, persist_result=False)
def infer_bucket_task(llm: Any, bucket: Bucket, run_fields: dict[str, str], progress: Any = None) -> BucketResult:
    """One bucket through the engine, validated. An engine exception is retried like any transient
    failure; only on the last attempt do its unfinished items become error rows."""
    (res,) = infer(llm, [bucket], run_fields=run_fields, progress=progress)
    lost = [e for e in res.errors if e.error_class == ENGINE_ERROR_CLASS]
    ctx = TaskRunContext.get()
    if lost and ctx is not None and ctx.task_run.run_count <= ctx.task.retries:
        raise TransientEngineFailure(f"{len(lost)} of {len(bucket.items)} requests in bucket {bucket.bucket_id} "
                                     f"were lost to an engine error: {lost[0].message}")
    return res


@task(name="write-partition", retries=3, retry_delay_seconds=[2, 10, 30], cache_policy=NO_CACHE, persist_result=False)
def write_task(staging: Staging, manifest: dict[str, Any]) -> dict[str, Any]:
    """Commit the staged run and publish it into its run_date partition (retry-safe)."""
    published = write_run(staging, manifest)
    get_run_logger().info("published run %s into run_date=%s: %s", staging.run_key, staging.run_date,
                          published.get("outputs"))
    return published


def prefect_stages() -> Stages:
    """`pipeline.run.Stages` whose stages run as the tasks above (call inside a flow run)."""

    def run_ingest(input_dir: Path, **kwargs: Any) -> IngestResult:
        return ingest_task(input_dir, **kwargs)

    def run_load(model_dir: Path, **engine_kwargs: Any) -> Any:
        return load_model_task(model_dir, engine_kwargs)

    def run_prepare(units: list[Any], tokenizer: Any, max_model_len: int, max_tokens: dict[str, int],
                    bucket_size: int, bucket_tokens: int, section_tokens: int) -> PreparedRequests:
        return prepare_task(quote(units), tokenizer, max_model_len, max_tokens, bucket_size, bucket_tokens,
                            section_tokens)

    def run_infer(llm: Any, buckets: list[Bucket], *, run_fields: dict[str, str],
                  progress: Any = None) -> Iterator[BucketResult]:
        for bucket in buckets:
            named = infer_bucket_task.with_options(task_run_name=f"infer-{bucket.bucket_id}")
            yield named(llm, quote(bucket), run_fields, progress)

    # the flow process's engine cache keeps the engines for the next run
    return Stages(ingest=run_ingest, load_llm=run_load, prepare=run_prepare, infer=run_infer, write=write_task,
                  release_engines=False)
