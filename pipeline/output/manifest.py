"""Run manifest: what went in, what came out, with which model/prompt/engine, how long it took.

Written last by the publish step (`OUTPUT/manifests/run_date=D/manifest-<run_key>.json`), so a
manifest's presence means the run's rows are published. `reconciliation` states the accounting
identities a data team checks (every input file and row is an output, an error, or already done).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from pipeline.config import RunConfig
from pipeline.errors import VALUE_OUT_OF_RANGE, Stage, Unit
from pipeline.identity import RunIdentity
from pipeline.ingest import DOCUMENT_KINDS, IngestResult
from pipeline.output.sink import MANIFESTS, Staging
from pipeline.plan.work import WorkUnit


class Reconciliation(BaseModel):
    """Input units vs. what became of them in this run."""

    files: int
    files_accounted: int  # files with at least one output/staged row or a file-level error
    pdf_files: int
    documents_ingested: int
    document_file_errors: int
    documents_output: int
    documents_errors: int
    documents_skipped: int
    transaction_rows_read: int  # data records the readers saw in readable logs (counted before mapping)
    transaction_rows_output: int
    transaction_rows_skipped: int
    transaction_row_errors: int
    windows: int
    windows_output: int
    windows_errors: int
    windows_skipped: int
    balanced: bool


class RunManifest(BaseModel):
    model_config = ConfigDict(extra="allow")

    run_key: str
    run_date: str
    started_at: str
    finished_at: str
    input_dir: str
    output_dir: str
    model_dir: str
    model_id: str
    prompt_version: str
    schema_version: str
    force: bool
    limit: int | None
    config: dict[str, Any]
    engine_config: dict[str, Any] = Field(default_factory=dict)
    engine_stats: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, Any]
    outputs: dict[str, int]
    errors_by_stage: dict[str, int]
    errors_by_class: dict[str, int]
    reconciliation: Reconciliation
    tokens: dict[str, int]
    timings_s: dict[str, float]
    throughput: dict[str, float]
    # per request, from its submission to the engine (buckets run one after another): ttft, tpot and e2e, each
    # {p50, p95, p99} in seconds over the requests that have that span
    request_latency_s: dict[str, dict[str, float]] = Field(default_factory=dict)
    recovered_runs: list[str] = Field(default_factory=list)


def manifest_paths(output_dir: Path) -> list[Path]:
    root = output_dir / MANIFESTS
    return sorted(root.glob("run_date=*/manifest-*.json")) if root.is_dir() else []


def latest_manifest(output_dir: Path) -> dict[str, Any] | None:
    """The most recently finished run's manifest (by its finished_at)."""
    best: tuple[str, dict[str, Any]] | None = None
    for p in manifest_paths(output_dir):
        try:
            m = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        key = str(m.get("finished_at", ""))
        if best is None or key > best[0]:
            best = (key, m)
    return best[1] if best else None


def dates_read_from(output_dir: Path, input_dir: Path) -> set[str]:
    """The run dates whose runs read `input_dir`: where a file path of that folder names the same file."""
    want, dates = str(input_dir.resolve()), set()
    for p in manifest_paths(output_dir):
        try:
            m = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if m.get("input_dir") == want and m.get("run_date"):
            dates.add(str(m["run_date"]))
    return dates


@dataclass
class RunRecord:
    """What a run did, gathered as it goes; the manifest is built from it once every part is staged."""

    started: dt.datetime
    run_key: str
    identity: RunIdentity
    ingested: IngestResult
    units: list[WorkUnit]
    skipped: Counter[str]  # units already published, by kind
    tx_table: pa.Table  # every transaction row this run read
    tx_new: pa.Table  # those not published before
    recovered: list[str]  # runs whose publish this run rolled forward
    timings: dict[str, float] = field(default_factory=dict)
    spooled_rows: int = 0  # transaction rows of logs read in batches (in spool files, not in tx_table)
    spooled_new_rows: int = 0  # those not published before
    spooled_sources: frozenset[str] = frozenset()
    tokens: Counter[str] = field(default_factory=Counter)
    latencies: list[tuple[float | None, float | None, float | None]] = field(default_factory=list)  # ttft, tpot, e2e
    resumed_buckets: int = 0
    errors_known: list[dict[str, Any]] = field(default_factory=list)  # met again, already published: not restaged


def _staged_errors(staging: Staging) -> list[dict[str, Any]]:
    tables = [pq.read_table(p, columns=["source_file", "stage", "error_class", "unit", "n_rows"])
              for p in staging.staged()["errors"]]
    return pa.concat_tables(tables).to_pylist() if tables else []


def reconcile(record: RunRecord, errs: list[dict[str, Any]], out_counts: dict[str, int]) -> Reconciliation:
    """The accounting identities: every file, PDF document, window and transaction row is an output, an error
    row or already published."""
    files = record.ingested.files.to_pylist()
    by_unit = Counter(e["unit"] for e in errs)
    doc_file_errors = sum(1 for e in errs if e["unit"] == Unit.DOCUMENT and e["stage"] == Stage.INGEST)
    doc_errors = sum(1 for e in errs if e["unit"] == Unit.DOCUMENT and e["stage"] != Stage.INGEST)
    n_windows = sum(1 for u in record.units if u.kind == "window") + sum(
        1 for e in errs if e["unit"] == Unit.WINDOW and e["error_class"] == VALUE_OUT_OF_RANGE)
    rows_read = sum(f["n_records"] for f in files)  # what the readers saw, counted before any mapping or staging
    pdf_files = sum(1 for f in files if f["kind"] in DOCUMENT_KINDS and f["status"] != "duplicate")
    ok_sources = (set(record.tx_table.column("source_file").to_pylist())
                  | set(record.ingested.documents.column("source_file").to_pylist()) | record.spooled_sources)
    err_sources = {e["source_file"] for e in errs}
    accounted = sum(1 for f in files if f["source_file"] in ok_sources or f["source_file"] in err_sources)
    docs_ingested = record.ingested.documents.num_rows
    skipped = record.skipped
    tx_all = record.tx_table.num_rows + record.spooled_rows
    tx_new = record.tx_new.num_rows + record.spooled_new_rows
    return Reconciliation(
        files=len(files), files_accounted=accounted, pdf_files=pdf_files, documents_ingested=docs_ingested,
        document_file_errors=doc_file_errors, documents_output=out_counts["documents"], documents_errors=doc_errors,
        documents_skipped=skipped["document"], transaction_rows_read=rows_read, transaction_rows_output=tx_new,
        transaction_rows_skipped=tx_all - tx_new, transaction_row_errors=by_unit[Unit.ROW], windows=n_windows,
        windows_output=out_counts["account_windows"], windows_errors=by_unit[Unit.WINDOW],
        windows_skipped=skipped["window"],
        balanced=(accounted == len(files)
                  and pdf_files == docs_ingested + doc_file_errors
                  and docs_ingested == out_counts["documents"] + doc_errors + skipped["document"]
                  and n_windows == out_counts["account_windows"] + by_unit[Unit.WINDOW] + skipped["window"]
                  and rows_read == tx_all + by_unit[Unit.ROW]),
    )


def _log_detail(files: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """One detail of each transaction log that records it, by file: `layout_source` (how a delimited or
    spreadsheet log's columns were found: detected, profile, or model, checked against the values) or
    `currency_unstated_rows` (rows of an export that states no currency, kept with the currency empty)."""
    out = {}
    for f in files:
        if f["kind"] == "transactions" and f["details"]:
            value = json.loads(f["details"]).get(key)
            if value:
                out[f["source_file"]] = value
    return out


def build_manifest(cfg: RunConfig, record: RunRecord, staging: Staging, llm: Any) -> dict[str, Any]:
    """The run's manifest (JSON-ready), from its record, its staged parts and the engine that ran it."""
    out_counts = {ds: sum(pq.ParquetFile(p).metadata.num_rows for p in parts) for ds, parts in staging.staged().items()}
    errs = _staged_errors(staging) + record.errors_known  # the run's accounting counts both
    rec = reconcile(record, errs, out_counts)
    files = record.ingested.files.to_pylist()
    finished = dt.datetime.now(dt.timezone.utc)
    total = (finished - record.started).total_seconds()
    infer_s = max(record.timings.get("infer", 0.0), 1e-9)
    tokens = record.tokens
    n_req = out_counts["documents"] + out_counts["account_windows"] + rec.documents_errors + rec.windows_errors
    m = RunManifest(
        run_key=record.run_key, run_date=cfg.run_date.isoformat(), started_at=record.started.isoformat(),
        finished_at=finished.isoformat(), input_dir=str(cfg.input_dir.resolve()), output_dir=str(cfg.output_dir.resolve()),
        model_dir=str(cfg.model_dir), model_id=record.identity.model_id,
        prompt_version=record.identity.prompt_version, schema_version=record.identity.schema_version,
        force=cfg.force, limit=cfg.limit, config=cfg.model_dump(mode="json"),
        engine_config=llm.config_summary() if llm is not None else {},
        engine_stats=llm.stats() if llm is not None else {},
        inputs={"files": len(files), "by_kind": dict(Counter(f["kind"] for f in files)),
                "bytes": sum(f["size_bytes"] for f in files), "documents": rec.documents_ingested,
                "transaction_rows": rec.transaction_rows_read, "windows": rec.windows,
                "buckets_resumed": record.resumed_buckets, "excluded": record.ingested.excluded,
                "layout_sources": _log_detail(files, "layout_source"),
                "currency_unstated_rows": _log_detail(files, "currency_unstated_rows")},
        outputs=out_counts,
        errors_by_stage=dict(Counter(e["stage"] for e in errs)),
        errors_by_class=dict(Counter(e["error_class"] for e in errs)),
        reconciliation=rec,
        tokens={"prompt": tokens["prompt"], "output": tokens["output"], "cached": tokens["cached"]},
        timings_s={k: round(v, 4) for k, v in {**record.timings, "total": total}.items()},
        throughput={"requests_per_s": round(n_req / infer_s, 3) if n_req else 0.0,
                    "output_tokens_per_s": round(tokens["output"] / infer_s, 1) if tokens["output"] else 0.0,
                    "total_tokens_per_s": round((tokens["prompt"] + tokens["output"]) / infer_s, 1)
                    if tokens["output"] else 0.0},
        request_latency_s=latency_percentiles(record.latencies),
        recovered_runs=record.recovered,
    )
    return m.model_dump(mode="json")


def latency_percentiles(latencies: list[tuple[float | None, float | None, float | None]]
                        ) -> dict[str, dict[str, float]]:
    """{ttft|tpot|e2e: {p50, p95, p99}} over the requests that have each span (linear interpolation)."""
    out: dict[str, dict[str, float]] = {}
    for i, name in enumerate(("ttft", "tpot", "e2e")):
        values = [v[i] for v in latencies if v[i] is not None]
        if values:
            q = np.percentile(np.asarray(values, dtype=np.float64), [50, 95, 99])
            out[name] = {f"p{p}": round(float(x), 4) for p, x in zip((50, 95, 99), q)}
    return out
