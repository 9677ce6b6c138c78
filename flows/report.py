"""Markdown for the Prefect artifacts: one per daily run (from its manifest), one per backfill."""

from __future__ import annotations

from typing import Any


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def run_markdown(manifest: dict[str, Any]) -> str:
    """Counts, errors, throughput and partition location of one published run."""
    rec = manifest["reconciliation"]
    day = manifest["run_date"]
    tp, tokens, timings = manifest["throughput"], manifest["tokens"], manifest["timings_s"]
    lines = [f"# Pipeline run {day}", ""]
    lines += _table(["", ""], [
        ["input", f"`{manifest['input_dir']}`"],
        ["partition", f"`{manifest['output_dir']}/<dataset>/run_date={day}`"],
        ["model", f"`{manifest['model_id']}` (prompt {manifest['prompt_version']}, "
                  f"schema {manifest['schema_version']})"],
        ["run key", f"`{manifest['run_key']}`" + (" (forced)" if manifest.get("force") else "")],
        ["reconciled", "yes" if rec["balanced"] else "**NO**"],
    ])
    lines += ["", "## Counts", ""]
    lines += _table(["unit", "in input", "output", "errors", "already done"], [
        ["documents (PDF files)", rec["pdf_files"], rec["documents_output"],
         rec["document_file_errors"] + rec["documents_errors"], rec["documents_skipped"]],
        ["account windows", rec["windows"], rec["windows_output"], rec["windows_errors"], rec["windows_skipped"]],
        ["transaction rows", rec["transaction_rows_read"], rec["transaction_rows_output"],
         rec["transaction_row_errors"], rec["transaction_rows_skipped"]],
    ])
    lines += ["", "Rows written: " + ", ".join(f"{ds} {n}" for ds, n in manifest["outputs"].items()), ""]
    lines += ["## Errors", ""]
    if manifest["errors_by_class"]:
        lines += _table(["stage", "count"], sorted(manifest["errors_by_stage"].items()))
        lines += [""]
        lines += _table(["error class", "count"], sorted(manifest["errors_by_class"].items(), key=lambda kv: -kv[1]))
    else:
        lines += ["none"]
    lines += ["", "## Throughput", ""]
    lines += _table(["requests/s", "output tok/s", "total tok/s", "prompt tokens", "output tokens", "cached tokens"],
                    [[tp["requests_per_s"], tp["output_tokens_per_s"], tp["total_tokens_per_s"],
                      tokens["prompt"], tokens["output"], tokens["cached"]]])
    lines += ["", "Stage seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in timings.items())]
    return "\n".join(lines) + "\n"


def backfill_markdown(start: str, end: str, results: list[dict[str, Any]]) -> str:
    """One row per date: what the backfill did with it."""
    rows = []
    for r in results:
        out = r.get("outputs") or {}
        rows.append([r["run_date"], r["status"], out.get("documents", ""), out.get("account_windows", ""),
                     out.get("transactions", ""), out.get("errors", ""), r.get("detail", "")])
    lines = [f"# Backfill {start} .. {end}", ""]
    header = ["run_date", "status", "documents", "account windows", "transactions", "error rows", "detail"]
    lines += _table(header, rows)
    return "\n".join(lines) + "\n"
