"""The pipeline as plain, composable stages (the Prefect flows wrap these as tasks).

    ingest(input_dir, *, limit=None, default_currency=None, exclude=(), limits=None, progress=False) -> IngestResult
        PDFs and transaction logs -> Arrow tables: documents, transactions, errors, files.
    plan_units(ingest_result, identity) -> tuple[list[WorkUnit], list[ErrorRecord]]
        One unit per document, one per (account, month) window; deterministic row_ids.
    prepare_requests(units, tokenizer, max_model_len, max_tokens, bucket_size, bucket_tokens) -> PreparedRequests
        Exact token ids from the model's tokenizer, long-document policy, length buckets.
    infer(llm, buckets, *, max_tokens=None, progress=None) -> Iterator[BucketResult]
        Streams every bucket through the engine as one continuous batch (JSON-schema constrained),
        validates every completion, and yields one BucketResult (rows + error rows) per finished bucket.
    load_llm, model_identity (from pipeline.models)
        The engine, loaded once per process and config; name plus a hash of config, tokenizer and weights.
    write_run(staging, manifest) -> dict
        Commit the staged run and publish it into its run_date partition (idempotent, retry-safe).
    run_pipeline(config: RunConfig, llm=None, stages=Stages()) -> RunSummary
        Composes the stages with staging, resume, already-done skipping and atomic publish.
        `stages` says how each stage is executed: directly (default) or as an orchestrator's
        tasks (flows/ passes Prefect tasks wrapping these same functions), so the composition
        exists exactly once.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline.config import RunConfig
from pipeline.errors import (
    VALUE_OUT_OF_RANGE,
    ErrorRecord,
    Stage,
    Unit,
    errors_from_table,
)
from pipeline.identity import RunIdentity, stable_id
from pipeline.infer.in_process import BucketResult, infer
from pipeline.infer.layouts import ask_layouts
from pipeline.infer.progress import InferProgress
from pipeline.ingest import IngestResult, ingest
from pipeline.ingest.discover import (
    SpooledLog,
    annotate_file_errors,
    reread_with_profiles,
)
from pipeline.ingest.ocr_cache import RUN_CACHE_DIR, OcrCache
from pipeline.models import load_llm, model_identity, return_freed_memory
from pipeline.output.datasets import (
    DATASETS,
    KIND_DATASET,
    dataset_schema,
    einvoice_row,
    error_rows,
    filing_fact_rows,
    transaction_rows,
)
from pipeline.output.delta import sync_delta, table_uri_of
from pipeline.output.filings import filing_facts_of, filing_row
from pipeline.output.manifest import RunRecord, build_manifest, dates_read_from
from pipeline.output.schema_drift import check_published_schema
from pipeline.output.sink import (
    COMMIT,
    Staging,
    any_published,
    check_output_dir,
    drop_stale,
    output_lock,
    publish_committed,
    published_ids,
    published_parts,
    published_transactions_of,
    roll_forward,
    unpublished,
)
from pipeline.output.supersede import Supersede, read_versions
from pipeline.plan.bucketing import Bucket, PreparedRequests, prepare_requests
from pipeline.plan.routing import route_long
from pipeline.plan.windows import out_of_range
from pipeline.plan.work import WorkUnit, document_units, run_identity, window_units
from pipeline.row_groups import row_group_batches

__all__ = ["BucketResult", "RunSummary", "Stages", "infer", "ingest", "load_llm", "model_identity", "plan_units",
           "prepare_requests", "run_pipeline", "write_run"]

# ------------------------------------------------------------------ units



def plan_units(result: IngestResult, identity: RunIdentity, extraction: str = "auto",
               earlier: Iterable[pl.DataFrame] = ()) -> tuple[list[WorkUnit], list[ErrorRecord]]:
    """Documents and account windows as work units whose row ids carry the run's `identity` (`extraction`:
    "auto" reads embedded e-invoices, "model" sends every document to the model). A failure of the window
    aggregation becomes error rows (one per source file, accounting for its rows), never a crash."""
    units = document_units(result.documents, identity, extraction)
    errors: list[ErrorRecord] = []
    try:
        windows = window_units(result.transactions, result.file_sha(), identity, result.spooled, earlier)
        for u in windows:
            reason = out_of_range(u.facts)
            if reason is None:
                units.append(u)
            else:
                errors.append(ErrorRecord(row_id=u.row_id, unit=Unit.WINDOW, source_file=u.source_file,
                                          stage=Stage.PREPARE, error_class=VALUE_OUT_OF_RANGE,
                                          message=f"window {u.facts['account']} {u.facts['period_start']}: {reason}",
                                          n_rows=u.n_rows))
    except Exception as exc:
        counts = Counter(result.transactions.column("source_file").to_pylist())
        counts.update({s.source_file: s.n_rows for s in result.spooled})
        for f, n in sorted(counts.items()):
            errors.append(ErrorRecord(row_id=stable_id("windows", f, identity.model_id), unit=Unit.WINDOW, source_file=f,
                                      stage=Stage.PREPARE, error_class="WindowAggregationError",
                                      message=f"{type(exc).__name__}: {exc}", n_rows=n))
    return units, errors


# ------------------------------------------------------------------ composition

def write_run(staging: Staging, manifest: dict[str, Any]) -> dict[str, Any]:
    """Commit the staged parts (unless already committed) and publish them. Safe to retry: a
    committed plan is never rewritten, and publishing rolls forward idempotently. A `--force` run's upsert
    touches only its own run_date partition."""
    if not (staging.root / COMMIT).exists():
        staging.commit(manifest, upsert="own_date" if manifest.get("force") else "all_dates")
    return publish_committed(staging.root, staging.output_dir)


@dataclass(frozen=True)
class Stages:
    """How `run_pipeline` executes each stage. The defaults call this module's functions;
    an orchestrator substitutes wrappers with the same signatures (e.g. Prefect tasks)."""

    ingest: Callable[..., IngestResult] = ingest
    load_llm: Callable[..., Any] = load_llm
    prepare: Callable[..., PreparedRequests] = prepare_requests
    infer: Callable[..., Iterator[BucketResult]] = infer
    write: Callable[[Staging, dict[str, Any]], dict[str, Any]] = write_run
    # The run owns the engines `load_llm` gives it: they are closed and their memory handed back before the
    # publish, so a large log's writing never adds to the engine's footprint. False where the loader keeps them
    # for later runs (a flow process's engine cache, a Ray pool).
    release_engines: bool = True


@dataclass
class RunSummary:
    """What `run_pipeline` returns: the manifest plus where things went."""

    run_key: str
    output_dir: Path
    manifest: dict[str, Any]
    delta_partitions: list[str] = field(default_factory=list)  # "dataset/run_date=..." written to Delta tables
    table_uri: str | None = None

    @property
    def reconciliation(self) -> dict[str, Any]:
        return self.manifest["reconciliation"]


def _run_key(cfg: RunConfig, identity: RunIdentity, result: IngestResult, todo: list[str],
             max_model_len: int | None, kv_capacity: int | None = None) -> str:
    """Names a run's staging: a resumed run must plan the same buckets, so everything that shapes them is here
    (the KV capacity too when it routes requests to the context-parallel engine)."""
    files = sorted(zip(result.files.column("source_file").to_pylist(), result.files.column("sha256").to_pylist()))
    extra = (kv_capacity,) if kv_capacity is not None else ()
    return stable_id("run", cfg.run_date.isoformat(), identity.model_id, identity.prompt_version,
                     identity.schema_version,
                     cfg.max_tokens_document, cfg.max_tokens_window, cfg.max_tokens_section, cfg.section_tokens,
                     cfg.bucket_size, cfg.bucket_tokens,
                     max_model_len, cfg.force, cfg.keep_history, cfg.limit, cfg.extraction, files, sorted(todo), *extra,
                     length=16)


def run_pipeline(cfg: RunConfig, llm: Any = None, stages: Stages = Stages()) -> RunSummary:
    """ingest -> plan -> skip done -> prepare -> infer (staged per bucket) -> commit -> publish.

    `llm` may be passed in (an already-loaded engine, or a test double with the same API);
    otherwise it is loaded with `load_llm` only when there is work to do (with `cfg.executor.kind == "ray"`: a
    pool of engine actors, `pipeline.infer.ray_executor`, shut down when the run ends)."""
    if cfg.executor.kind == "ray" and llm is None:
        if cfg.engine.context_parallel_size > 1:
            raise ValueError("--context-parallel is not available with --executor ray yet")
        from pipeline.infer.ray_executor import ray_stage_functions  # noqa: PLC0415 - Ray is an optional extra

        stages = replace(stages, **ray_stage_functions(cfg.executor))
        pool: list[Any] = []
        try:
            return _run(cfg, None, replace(stages, load_llm=lambda *a, **k: _keep(pool, stages.load_llm(*a, **k)),
                                           release_engines=False))
        finally:
            for p in pool:
                p.shutdown()
    return _run(cfg, llm, stages)


def _close(engine: Any) -> None:
    if callable(close := getattr(engine, "close", None)):  # a test double may have none
        close()


def _keep(into: list[Any], obj: Any) -> Any:
    into.append(obj)
    return obj


@contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    t = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = time.perf_counter() - t


@dataclass
class _Todo:
    """The planned units split by what still has to happen to them."""

    units: list[WorkUnit]
    plan_errors: list[ErrorRecord]
    model: list[WorkUnit]  # not yet published, for the model
    direct: list[WorkUnit]  # not yet published, read from embedded e-invoices (no model needed)
    skipped: Counter[str]  # already published, by kind
    tx_table: pa.Table
    tx_new: pa.Table
    facts_new: pa.Table  # filing facts not published before
    spooled_new: list[SpooledLog] = field(default_factory=list)  # logs read in batches, not published before
    errors_new: pa.Table | None = None  # this run's ingest and plan error rows not published before
    errors_known: pa.Table | None = None  # those already published (left where they are)
    supersede: Supersede = field(default_factory=Supersede)  # what the publish retires (pipeline.output.supersede)
    keep_ids: pa.Array | None = None  # the row ids this run holds, staged or already published


def _earlier_rows(result: IngestResult, output_dir: Path, read: Iterable[str], dates: set[str]
                  ) -> Iterator[pl.DataFrame]:
    """Published transactions of the accounts this run read, from files it did not read (with their row id as
    tx_id): a window covers every transaction of its account-month, whichever run read it."""
    accounts = [result.transactions.column("account")] if result.transactions.num_rows else []
    for s in result.spooled:  # a log's distinct accounts, gathered slice by slice, not its rows
        slices = row_group_batches(s.path, columns=["account"])
        accounts.append(pa.chunked_array([pc.unique(b.column(0)) for b in slices], pa.string()))
    if not accounts:
        return
    unique = pc.unique(pa.chunked_array([c for a in accounts for c in a.chunks], pa.string()))
    for t in published_transactions_of(output_dir, unique, pa.array(sorted(read), pa.string()), dates):
        yield pl.from_arrow(t).rename({"row_id": "tx_id"})


def _plan(cfg: RunConfig, result: IngestResult, identity: RunIdentity, output_dir: Path) -> _Todo:
    dates = dates_read_from(output_dir, cfg.input_dir) | {cfg.run_date.isoformat()}
    read = replace(read_versions(result.files, result.errors), dates=tuple(sorted(dates)))
    units, plan_errors = plan_units(result, identity, cfg.extraction,
                                    _earlier_rows(result, output_dir, read.files, dates))
    tx_table = transaction_rows(result.transactions, result.file_sha(), identity.schema_version)
    # transactions are checked against the published ones part by part in Arrow: a large log's ids are never a
    # Python set
    done = (_windows_elsewhere(output_dir, cfg.run_date.isoformat(), units) if cfg.force else
            published_ids(output_dir, tuple(d for d in DATASETS if d not in ("errors", "transactions"))))
    facts = filing_fact_rows(result.facts, identity.schema_version)
    todo = [u for u in units if u.row_id not in done]
    spooled_new = [s for s in result.spooled
                   if cfg.force or not s.n_rows or not any_published(output_dir, "transactions", [_first_id(s)])]
    run_errors = error_rows(errors_from_table(result.errors) + plan_errors, identity.row_fields())
    # an error this run meets again stays where it was published (rows never move between run dates)
    new_errors = run_errors if cfg.force else unpublished(output_dir, "errors", run_errors)
    keep = pa.chunked_array([pa.array([u.row_id for u in units], pa.string()), run_errors.column("row_id").cast(pa.string()),
                             facts.column("row_id").cast(pa.string())])
    supersede = replace(read, window_keys=tuple((str(u.facts["account"]), str(u.facts["period_start"]))
                                                for u in units if u.kind == "window"),
                        probes=_probes(tx_table, result.spooled))
    return _Todo(units, plan_errors, model=[u for u in todo if u.extracted is None],
                 direct=[u for u in todo if u.extracted is not None],
                 skipped=Counter(u.kind for u in units if u.row_id in done), tx_table=tx_table,
                 tx_new=tx_table if cfg.force else unpublished(output_dir, "transactions", tx_table),
                 facts_new=_unpublished(facts, done), spooled_new=spooled_new, errors_new=new_errors,
                 errors_known=_without(run_errors, new_errors), supersede=supersede,
                 keep_ids=pc.unique(keep.combine_chunks()) if len(keep) else pa.array([], pa.string()))


def _windows_elsewhere(output_dir: Path, run_date: str, units: list[WorkUnit]) -> set[str]:
    """`--force` re-processes the units of its own date's partition: a window published under another date stays
    that date's (one row per account-month), so it counts as done."""
    keys: set[tuple[str, str]] = set()
    for part in published_parts(output_dir, "account_windows"):
        if part.parent.name != f"run_date={run_date}":
            t = pq.read_table(part, columns=["account", "period_start"])
            keys.update(zip(t.column("account").to_pylist(), (str(d) for d in t.column("period_start").to_pylist())))
    return {u.row_id for u in units if u.kind == "window"
            and (str(u.facts["account"]), str(u.facts["period_start"])) in keys}


def _probes(tx_table: pa.Table, spooled: list[SpooledLog]) -> dict[str, tuple[int, str]]:
    """One (source_row, row id) per log read: tells the publish whether a log's published rows of the same
    version were read by another reader version (pipeline.output.supersede)."""
    out: dict[str, tuple[int, str]] = {}
    if tx_table.num_rows:
        first = pl.from_arrow(tx_table.select(["source_file", "source_row", "row_id"])).group_by(
            "source_file").first()
        out = {r["source_file"]: (r["source_row"], r["row_id"]) for r in first.iter_rows(named=True)}
    for s in spooled:
        if s.n_rows:
            head = pq.ParquetFile(s.path).read_row_group(0, columns=["row_id", "source_row"])
            out[s.source_file] = (int(head.column("source_row")[0].as_py()), str(head.column("row_id")[0]))
    return out


def _first_id(spooled: SpooledLog) -> str:
    """The row id of a spooled log's first row: a log's rows are published together, so it stands for all."""
    return str(pq.ParquetFile(spooled.path).read_row_group(0, columns=["row_id"]).column(0)[0])


def _without(table: pa.Table, rows: pa.Table) -> pa.Table:
    """`table`'s rows whose row_id is not among `rows`'."""
    return table.filter(pc.invert(pc.is_in(table.column("row_id"), value_set=rows.column("row_id"))))


def _unpublished(table: pa.Table, done: set[str]) -> pa.Table:
    """The rows whose row_id is not published yet."""
    return table.filter(pa.array([rid not in done for rid in table.column("row_id").to_pylist()], pa.bool_()))


def _infer_all(cfg: RunConfig, stages: Stages, staging: Staging, record: RunRecord, run_fields: dict[str, str],
               runs: list[tuple[Callable[[], Any], list[Bucket]]]) -> list[int]:
    """Each engine's pending buckets through `stages.infer` (an engine is asked for only if it has pending
    buckets), every finished bucket staged as it comes. Returns the requests each engine ran."""
    pending = [(llm, [b for b in buckets if not staging.is_done(b.bucket_id)]) for llm, buckets in runs]
    record.resumed_buckets = sum(len(b) for _, b in runs) - sum(len(b) for _, b in pending)
    bar = InferProgress(sum(len(b.items) for _, buckets in pending for b in buckets), cfg.progress)
    try:
        for engine, buckets in pending:
            if not buckets:
                continue
            for res in stages.infer(engine(), buckets, run_fields=run_fields, progress=bar):
                staging.write_part(res.bucket_id, {KIND_DATASET[res.kind]: _rows_table(res),
                                                   "errors": error_rows(res.errors, run_fields)})
                record.tokens.update(prompt=res.prompt_tokens, output=res.output_tokens, cached=res.cached_tokens)
                record.latencies.extend(res.latencies)
                # what the bucket's steps and staging freed goes back (1-2 ms): a 600-window run's peak 1,449 ->
                # 1,403 MiB with a 256M KV pool (docs/eval/bank-exports.md)
                return_freed_memory(collect=False)
    finally:
        bar.close()
    return [sum(len(b.items) for b in buckets) for _, buckets in pending]


def _run(cfg: RunConfig, llm: Any, stages: Stages) -> RunSummary:
    started = dt.datetime.now(dt.timezone.utc)
    loaded: list[Any] = []  # the engines this run loaded (an engine passed in stays its caller's)
    if stages.release_engines:
        load = stages.load_llm
        stages = replace(stages, load_llm=lambda *a, **k: _keep(loaded, load(*a, **k)))
    output_dir = cfg.output_dir.resolve()
    identity = run_identity(cfg, llm.tokenizer if llm is not None else None)
    run_fields = identity.row_fields()
    timings: dict[str, float] = {}
    check_output_dir(output_dir)
    with output_lock(output_dir):
        recovered = roll_forward(output_dir)
        OcrCache(output_dir.joinpath(*RUN_CACHE_DIR)).remove_partial()  # what a killed run was writing
        check_published_schema(output_dir)  # before any work: a run never publishes beside an older schema
        with _timed(timings, "ingest"):
            result = stages.ingest(cfg.input_dir, limit=cfg.limit, default_currency=cfg.default_currency,
                                   exclude=(output_dir, *cfg.exclude), limits=cfg.limits,
                                   progress=cfg.progress, bank_profiles=cfg.bank_profiles(),
                                   ocr_cache=output_dir.joinpath(*RUN_CACHE_DIR) if cfg.ocr_cache else None)
        timings.update({f"ingest.{k}": v for k, v in result.seconds.items()})
        if result.layout_questions and cfg.model_layouts:
            with _timed(timings, "map_layouts"):
                llm = llm or stages.load_llm(cfg.model_dir, **cfg.engine_kwargs())
                result = _map_layouts(cfg, llm, result)
        with _timed(timings, "plan"):
            todo = _plan(cfg, result, identity, output_dir)
            return_freed_memory(collect=False)  # the window aggregation's buffers, before the engine needs the room
        if not todo.model:
            llm = None
        elif llm is None:
            with _timed(timings, "load_model"):
                llm = stages.load_llm(cfg.model_dir, **cfg.engine_kwargs())
        max_model_len = llm.max_model_len if llm is not None else cfg.engine.max_model_len
        # With --context-parallel, requests that do not fit this engine's KV cache go to a second engine.
        capacity = llm.kv_capacity_tokens if llm is not None and cfg.engine.context_parallel_size > 1 else None
        run_key = _run_key(cfg, identity, result, [u.row_id for u in todo.model + todo.direct],
                           max_model_len, capacity)
        record = RunRecord(started, run_key, identity, result, todo.units, todo.skipped, todo.tx_table,
                           todo.tx_new, recovered, timings,
                           spooled_rows=sum(s.n_rows for s in result.spooled),
                           spooled_new_rows=sum(s.n_rows for s in todo.spooled_new),
                           spooled_sources=frozenset(s.source_file for s in result.spooled if s.n_rows),
                           errors_known=todo.errors_known.select(["source_file", "stage", "error_class", "unit",
                                                                  "n_rows"]).to_pylist())
        drop_stale(output_dir, keep=run_key)
        staging = Staging(output_dir, run_key, cfg.run_date.isoformat())
        for spooled in todo.spooled_new:  # large logs: staged from their spool files, batch by batch
            part = f"ingest-log-{spooled.sha[:20]}"
            if not staging.is_done(part):
                staging.write_spool_part(part, Path(spooled.path), spooled.sha, identity.schema_version)
        if not staging.is_done("ingest"):
            staging.write_part("ingest", {"transactions": todo.tx_new, "filing_facts": todo.facts_new,
                                          "documents": _einvoice_table(todo.direct, run_fields),
                                          "errors": todo.errors_new})
        if not cfg.keep_history:
            staging.write_supersede(todo.supersede, todo.keep_ids)
        with _timed(timings, "prepare"):
            prepared = PreparedRequests()
            if llm is not None:
                prepared = stages.prepare(todo.model, llm.tokenizer, max_model_len, cfg.max_tokens(),
                                          cfg.bucket_size, cfg.bucket_tokens, cfg.section_tokens)
            long_buckets: list[Bucket] = []
            if capacity is not None:
                prepared.buckets, long_buckets = route_long(prepared.buckets, capacity, cfg.bucket_size)
            if not staging.is_done("prepare"):
                staging.write_part("prepare", {"errors": error_rows(prepared.errors, run_fields)})
        cp_llm: list[Any] = []  # the context-parallel engine, loaded only if a long bucket is still pending

        def context_parallel() -> Any:
            with _timed(timings, "load_context_parallel_model"):
                cp_llm.append(stages.load_llm(cfg.model_dir, **cfg.engine_kwargs(),
                                              context_parallel_size=cfg.engine.context_parallel_size))
            return cp_llm[0]

        with _timed(timings, "infer"):
            _, long_requests = _infer_all(cfg, stages, staging, record, run_fields,
                                          [(lambda: llm, prepared.buckets), (context_parallel, long_buckets)])
        if prepared.filings and not staging.is_done("reduce"):
            staging.write_part("reduce", {"documents": _filing_rows(prepared, staging, result, output_dir,
                                                                      run_fields)})
        manifest = build_manifest(cfg, record, staging, llm)
        if cp_llm:
            manifest["engine_config"]["context_parallel"] = cp_llm[0].config_summary()
            manifest["engine_stats"]["context_parallel"] = {
                **cp_llm[0].stats(), "requests": long_requests}
        if loaded:  # closed before the publish, after the last reference: weights and KV pool go back to the system
            for engine in loaded:
                _close(engine)
            llm = engine = None
            loaded.clear()
            cp_llm.clear()
            return_freed_memory()
        published = stages.write(staging, manifest)
        uri = table_uri_of(output_dir, cfg.table_uri) if cfg.table_format == "delta" else None
        written = sync_delta(output_dir, uri, published, cfg.storage_options) if uri else []
    return RunSummary(run_key=run_key, output_dir=output_dir, manifest=published, delta_partitions=written,
                      table_uri=uri)


def _map_layouts(cfg: RunConfig, llm: Any, result: IngestResult) -> IngestResult:
    """Logs whose layout detection left open, read as the model maps their columns where the values bear the
    mapping out; the others keep their error row, which now says what the model answered and why it was not
    used."""
    if not hasattr(llm, "generate"):  # an executor's engine pool: the questions stay unanswered
        return annotate_file_errors(result, {f: "the model reads layouts only with the in-process executor"
                                             for f in result.layout_questions})
    answers = ask_layouts(llm, result.layout_questions)
    refused = {f: f"the model's column mapping was not used: {a}" for f, a in answers.items() if isinstance(a, str)}
    chosen = {f: a for f, a in answers.items() if not isinstance(a, str)}
    result = reread_with_profiles(result, chosen, limits=cfg.limits, default_currency=cfg.default_currency)
    return annotate_file_errors(result, refused)


def _filing_rows(prepared: PreparedRequests, staging: Staging, result: IngestResult, output_dir: Path,
                 run_fields: dict[str, str]) -> pa.Table:
    """The reduce step: each filing's documents row from its sections' rows (staged by this run, or published by
    an earlier one) and its facts."""
    wanted = {rid for plan in prepared.filings for rid, _ in plan.sections}
    cols = ["row_id", "chars_read", "prompt_tokens", "output_tokens"]
    tables = [pq.read_table(p, columns=cols) for p in staging.staged()["filing_sections"]]
    tables += [pq.read_table(p, columns=cols) for p in published_parts(output_dir, "filing_sections")]
    rows = {r["row_id"]: r for t in tables for r in t.to_pylist() if r["row_id"] in wanted}
    out = [filing_row(plan, rows, filing_facts_of(result.facts, plan.unit.context["doc_id"]), run_fields)
           for plan in prepared.filings]
    return pa.Table.from_pylist(out, schema=dataset_schema("documents"))


def _einvoice_table(units: list[WorkUnit], run_fields: dict[str, str]) -> pa.Table:

    return pa.Table.from_pylist([einvoice_row(u, run_fields) for u in units], schema=dataset_schema("documents"))


def _rows_table(res: BucketResult) -> pa.Table:

    return pa.Table.from_pylist(res.rows, schema=dataset_schema(KIND_DATASET[res.kind]))
