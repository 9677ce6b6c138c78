"""Human-readable views (rich): the closing summary of a run and `pipeline inspect OUTPUT`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipeline.ingest.ocr_cache import RUN_CACHE_DIR, OcrCache
from pipeline.output.datasets import DATASETS
from pipeline.output.manifest import latest_manifest
from pipeline.output.schema_drift import find_drift, part_count, row_schema_versions
from pipeline.output.sink import STAGING, TRASH, published_parts


def run_summary_table(m: dict[str, Any]) -> Table:
    """Closing summary: inputs, outcomes, errors, tokens, timings."""
    r = m["reconciliation"]
    t = Table(title=f"pipeline run {m['run_date']} · {m['model_id']} · prompts {m['prompt_version']}", show_lines=False)
    t.add_column("what")
    t.add_column("count / value", justify="right")
    t.add_column("detail")
    kinds = ", ".join(f"{k}={v}" for k, v in sorted(m["inputs"]["by_kind"].items()))
    t.add_row("input files", str(r["files"]), kinds)
    t.add_row("documents → rows", str(r["documents_output"]),
              f"{r['documents_ingested']} readable, {r['documents_errors']} failed, {r['documents_skipped']} already done,"
              f" {r['document_file_errors']} unreadable PDFs")
    t.add_row("transactions → rows", str(r["transaction_rows_output"]),
              f"{r['transaction_rows_read']} read, {r['transaction_row_errors']} bad rows,"
              f" {r['transaction_rows_skipped']} already done")
    t.add_row("account windows → rows", str(r["windows_output"]),
              f"{r['windows']} windows, {r['windows_errors']} failed, {r['windows_skipped']} already done")
    t.add_row("error rows", str(m["outputs"].get("errors", 0)),
              ", ".join(f"{k}={v}" for k, v in sorted(m["errors_by_class"].items(), key=lambda kv: -kv[1])))
    t.add_row("reconciled", "yes" if r["balanced"] else "[red]NO[/red]", "every input file/row is an output, an error or done")
    tok = m["tokens"]
    t.add_row("tokens", f"{tok['prompt'] + tok['output']:,}", f"prompt {tok['prompt']:,} (cached {tok['cached']:,}), output {tok['output']:,}")
    thr = m["throughput"]
    t.add_row("throughput", f"{thr['total_tokens_per_s']:,.0f} tok/s",
              f"{thr['requests_per_s']:.2f} req/s, {thr['output_tokens_per_s']:,.0f} output tok/s")
    t.add_row("time", f"{m['timings_s']['total']:.2f} s",
              ", ".join(f"{k} {v:.2f}s" for k, v in m["timings_s"].items() if k != "total"))
    t.add_row("output", m["output_dir"], f"run_date={m['run_date']}, run {m['run_key']}")
    return t


def inspect_output(output_dir: Path, console: Console | None = None) -> int:
    """Partitions and row counts per dataset, error breakdown, and the last manifest."""
    console = console or Console()
    if not output_dir.is_dir():
        console.print(f"[red]no such output directory: {output_dir}[/red]")
        return 2
    parts_table = Table(title=f"datasets in {output_dir}")
    for col in ("dataset", "run_date", "files", "rows", "bytes"):
        parts_table.add_column(col, justify="right" if col in ("files", "rows", "bytes") else "left")
    found = False
    errors_by: Counter[tuple[str, str]] = Counter()
    for ds in DATASETS:
        by_date: dict[str, list[int]] = {}
        for p in published_parts(output_dir, ds):
            found = True
            date = p.parent.name.split("=", 1)[1]
            acc = by_date.setdefault(date, [0, 0, 0])
            acc[0] += 1
            acc[1] += pq.ParquetFile(p).metadata.num_rows
            acc[2] += p.stat().st_size
            if ds == "errors":
                t = pq.read_table(p, columns=["stage", "error_class"])
                errors_by.update(zip(t.column("stage").to_pylist(), t.column("error_class").to_pylist()))
        for date, (files, rows, size) in sorted(by_date.items()):
            parts_table.add_row(ds, date, str(files), f"{rows:,}", f"{size:,}")
    if not found:
        console.print(f"no published datasets under {output_dir}")
    else:
        console.print(parts_table)
    if errors_by:
        et = Table(title="errors by stage and class")
        et.add_column("stage")
        et.add_column("error_class")
        et.add_column("rows", justify="right")
        for (stage, cls), n in sorted(errors_by.items(), key=lambda kv: (-kv[1], kv[0])):
            et.add_row(stage, cls, str(n))
        console.print(et)
    versions = {ds: row_schema_versions(output_dir, ds) for ds in DATASETS}
    mixed = {ds: v for ds, v in versions.items() if len(v) > 1}
    if mixed:
        console.print("rows of several schema versions (each row keeps the version whose rules produced it): "
                      + "; ".join(f"{ds} {', '.join(f'{k}: {n:,}' for k, n in sorted(v.items()))}"
                                  for ds, v in mixed.items()), soft_wrap=True)
    for d in find_drift(output_dir):
        console.print(f"[red]{d.dataset}: {part_count(d)} of an older schema ({', '.join(sorted(d.versions))}; "
                      f"{escape(', '.join(d.differences[:3]))}): runs refuse this output until `pipeline migrate --output "
                      f"{output_dir}` rewrites them[/red]", soft_wrap=True)
    m = latest_manifest(output_dir)
    if m:
        console.print(run_summary_table(m))
        console.print(f"last manifest: run {m['run_key']} finished {m['finished_at']}")
    scans, size = OcrCache(output_dir.joinpath(*RUN_CACHE_DIR)).size()
    if scans:
        console.print(f"OCR cache: page texts of {scans:,} scan(s), {size / 1e6:,.1f} MB in "
                      f"{output_dir.joinpath(*RUN_CACHE_DIR)} (a later run reads those scans from there; delete it, "
                      "or pass --no-ocr-cache, to OCR them again)", soft_wrap=True)
    staging = output_dir / STAGING
    runs = sorted(p.name for p in staging.iterdir() if not p.name.startswith(TRASH)) if staging.is_dir() else []
    if runs:  # (the trash of a finished run, left by a kill during its cleanup, is removed by the next run)
        console.print(f"[yellow]unpublished staging present ({', '.join(runs)}): an interrupted run; re-run it to "
                      "resume[/yellow]")
    return 0 if found else 1


def manifest_json(m: dict[str, Any]) -> str:
    return json.dumps(m, indent=1)
