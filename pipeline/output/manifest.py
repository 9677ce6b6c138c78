"""Run manifest: what went in, what came out, with which model/prompt/engine, how long it took.

Written last by the publish step (`OUTPUT/manifests/run_date=D/manifest-<run_key>.json`), so a
manifest's presence means the run's rows are published. `reconciliation` states the accounting
identities a data team checks (every input file and row is an output, an error, or already done).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipeline.output.sink import MANIFESTS


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
