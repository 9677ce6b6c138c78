"""Delta Lake tables of the output datasets (`--table-format delta`), on a local path or an object store.

    sync_delta(output_dir, table_uri, manifest, storage_options) -> list[str]   (the partitions written)

The run's Parquet output stays its working state: the already-done lookups, the supersede rules and the crash
recovery of `pipeline.output.sink` read it, and its publish is one atomic swap per partition. After each publish,
every run_date partition of every dataset whose parts changed is written to `TABLE_URI/<dataset>` in one Delta
commit that replaces that partition (`replaceWhere run_date = ...`): the table then holds exactly what the Parquet
layout holds, rows retired there are gone here, and repeating a sync changes nothing (idempotent by row id,
because the partition's rows are). Each commit carries the run's key and manifest as commit metadata, so
`DeltaTable(uri).history()` says which run wrote which version, and time travel (`DeltaTable(uri, version=n)`,
polars `read_delta(version=...)`) reads any earlier state.

Which partitions were synced, and at what version of their parts, is kept in `OUTPUT/_delta_sync.json` per table
URI; a sync that a crash cut short is finished by the next run (a partition written twice is the same rows).
Object stores go through delta-rs' storage options (`s3://`, `az://`, `gs://`; e.g. AWS_ENDPOINT_URL,
AWS_REGION, credentials, or the provider's environment variables). One writer per table: the run holds the output
folder's lock; writers from several machines to one S3 table need delta-rs' locking (AWS_S3_LOCKING_PROVIDER or
conditional puts), which this module does not configure.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.output.atomic import write_text_atomic
from pipeline.output.datasets import DATASETS, dataset_schema
from pipeline.output.sink import OutputError, published_parts

SYNC_STATE = "_delta_sync.json"
PARTITION = "run_date"


def _version(parts: list[Path]) -> str:
    """What identifies a partition's content: its part files (named by their rows' hash) and their sizes."""
    h = hashlib.sha256()
    for p in sorted(parts):
        h.update(f"{p.name}:{p.stat().st_size}\n".encode())
    return h.hexdigest()[:16]


def _partition_table(ds: str, run_date: str, parts: list[Path]) -> pa.Table:
    schema = dataset_schema(ds)
    tables = [pq.read_table(p).select(schema.names).cast(schema) for p in sorted(parts)]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    return table.append_column(pa.field(PARTITION, pa.string(), nullable=False),
                               pa.array([run_date] * table.num_rows, pa.string()))


def _relax_not_null(uri: str, schema: pa.Schema, storage_options: dict[str, str] | None) -> None:
    """Let the table at `uri`, if one exists, hold nulls in the columns this version writes as nullable: a table
    an older version made keeps its NOT NULL columns (Delta checks them on every write), and the schema may since
    allow nulls there (transactions' currency, for an export that states none)."""
    # lazy: only runs that write Delta need it
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(uri, storage_options=storage_options or None):
        return
    table = DeltaTable(uri, storage_options=storage_options or None)
    nullable = {f.name for f in schema if f.nullable}
    for field in table.schema().fields:
        if not field.nullable and field.name in nullable:
            table.alter.drop_column_not_null(field.name)


def _read_state(output_dir: Path) -> dict[str, Any]:
    path = output_dir / SYNC_STATE
    return json.loads(path.read_text()) if path.exists() else {}


def table_uri_of(output_dir: Path, table_uri: str | None) -> str:
    """Where the Delta tables go: the URI given, else `OUTPUT/delta`."""
    return table_uri.rstrip("/") if table_uri else str(output_dir / "delta")


def sync_delta(output_dir: Path, table_uri: str, manifest: dict[str, Any],
               storage_options: dict[str, str] | None = None) -> list[str]:
    """Write every changed partition of every dataset to its Delta table (one commit each); returns
    "dataset/run_date=..." of the partitions written. An object-store or Delta error is an OutputError naming the
    table."""
    from deltalake import CommitProperties, write_deltalake  # noqa: PLC0415 - only runs that write Delta need it

    state = _read_state(output_dir)
    synced: dict[str, dict[str, str]] = state.setdefault(table_uri, {})
    meta = {"pipeline.run_key": str(manifest.get("run_key", "")),
            "pipeline.manifest": json.dumps(manifest, default=str, sort_keys=True)}
    written = []
    for ds in DATASETS:
        by_date: dict[str, list[Path]] = {}
        for part in published_parts(output_dir, ds):
            by_date.setdefault(part.parent.name.split("=", 1)[1], []).append(part)
        done = synced.setdefault(ds, {})
        uri = f"{table_uri}/{ds}"
        relaxed = False  # the table's NOT NULL columns checked once per sync, before its first write
        for run_date in sorted(set(by_date) | set(done)):
            parts = by_date.get(run_date, [])
            version = _version(parts)
            if done.get(run_date) == version:
                continue
            try:
                if not relaxed:
                    _relax_not_null(uri, dataset_schema(ds), storage_options)
                    relaxed = True
                write_deltalake(uri, _partition_table(ds, run_date, parts), mode="overwrite",
                                predicate=f"{PARTITION} = '{run_date}'", partition_by=[PARTITION],
                                storage_options=storage_options or None,
                                commit_properties=CommitProperties(custom_metadata=meta))
            except Exception as exc:  # noqa: BLE001 - delta-rs raises its own and the object store's errors
                raise OutputError(f"writing Delta table {uri} (partition {run_date}) failed: "
                                  f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc
            done[run_date] = version
            # after each commit: a crash repeats at most this partition
            write_text_atomic(output_dir / SYNC_STATE, json.dumps(state, indent=1, sort_keys=True))
            written.append(f"{ds}/{PARTITION}={run_date}")
    return written
