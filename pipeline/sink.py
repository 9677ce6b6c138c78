"""Parquet sink: staged per-bucket parts, atomic publish, upsert by row_id, already-done lookups.

Layout (hive-partitioned by run_date; readable with polars `scan_parquet(..., hive_partitioning=True)`
and DuckDB `read_parquet(..., hive_partitioning=true)`):

    OUTPUT/documents/run_date=YYYY-MM-DD/part-<hash>.parquet
    OUTPUT/account_windows/run_date=YYYY-MM-DD/part-<hash>.parquet
    OUTPUT/transactions/run_date=YYYY-MM-DD/part-<hash>.parquet
    OUTPUT/errors/run_date=YYYY-MM-DD/part-<hash>.parquet
    OUTPUT/manifests/run_date=YYYY-MM-DD/manifest-<run_key>.json
    OUTPUT/_staging/<run_key>/...          (work in progress; never read by queries)

Protocol:
1. `Staging(output, run_key)`: every finished bucket writes its parts (tmp file + rename) and then
   a `done/<bucket>` marker, so a run killed at any point leaves only whole buckets behind; a re-run
   with the same run key reuses them (buckets are deterministic, so the rows are the same).
2. `commit(manifest)`: writes the publish plan (`COMMIT.json`) atomically. From then on the run
   counts as done, and `recover()` can finish its publication after a crash.
3. publish: rows of older parts whose `row_id` is in this run are removed (upsert: a re-processed
   or retried unit never duplicates), then each part is renamed into its partition under a
   content-addressed name, then the manifest is written and the staging directory removed.
   Each step is idempotent, so rolling forward after a crash is always safe.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.datasets import DATASETS, dataset_schema
from pipeline.ids import stable_id

STAGING = "_staging"
MANIFESTS = "manifests"
COMMIT = "COMMIT.json"
COMPRESSION = "zstd"


def _write_parquet(table: pa.Table, path: Path) -> None:
    """Write via a temporary name and rename, so `path` is either absent or complete."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pq.write_table(table, tmp, compression=COMPRESSION)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextmanager
def output_lock(output_dir: Path) -> Iterator[None]:
    """One writer per output directory (released by the OS if the process dies)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    with open(output_dir / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise RuntimeError(f"another pipeline run is writing to {output_dir}") from exc
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def published_parts(output_dir: Path, dataset: str) -> list[Path]:
    root = output_dir / dataset
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("run_date=*/*.parquet") if not p.name.startswith((".", "_")))


def published_ids(output_dir: Path, datasets: tuple[str, ...]) -> set[str]:
    """row_ids already published in these datasets (the already-done check)."""
    ids: set[str] = set()
    for ds in datasets:
        for part in published_parts(output_dir, ds):
            ids.update(pq.read_table(part, columns=["row_id"]).column("row_id").to_pylist())
    return ids


def read_dataset(output_dir: Path, dataset: str) -> pa.Table:
    """All published rows of a dataset with `run_date` (from the partition) as a column."""
    tables = []
    for part in published_parts(output_dir, dataset):
        t = pq.read_table(part)
        run_date = part.parent.name.split("=", 1)[1]
        tables.append(t.append_column("run_date", pa.array([run_date] * t.num_rows, pa.string())))
    if not tables:
        schema = dataset_schema(dataset)
        return schema.append(pa.field("run_date", pa.string())).empty_table()
    return pa.concat_tables(tables)


class Staging:
    """Work-in-progress parts of one run (see the module docstring for the protocol)."""

    def __init__(self, output_dir: Path, run_key: str, run_date: str) -> None:
        self.output_dir = output_dir
        self.run_key = run_key
        self.run_date = run_date
        self.root = output_dir / STAGING / run_key
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "done").mkdir(exist_ok=True)

    # ---- writing
    def is_done(self, part: str) -> bool:
        return (self.root / "done" / part).exists()

    def write_part(self, part: str, tables: dict[str, pa.Table]) -> None:
        """Stage one unit of progress (a bucket, or the ingest outputs) atomically."""
        for ds, table in tables.items():
            if table.num_rows == 0:
                continue
            table = table.select(dataset_schema(ds).names).cast(dataset_schema(ds))
            _write_parquet(table, self.root / "parts" / ds / f"{part}.parquet")
        _write_text(self.root / "done" / part, "")

    def staged(self) -> dict[str, list[Path]]:
        return {ds: sorted((self.root / "parts" / ds).glob("*.parquet")) for ds in DATASETS}

    # ---- committing
    def commit(self, manifest: dict[str, Any]) -> Path:
        """Freeze the publish plan; after this the run is recoverable by roll-forward."""
        plan: dict[str, list[list[str]]] = {}
        ids: list[str] = []
        for ds, parts in self.staged().items():
            for p in parts:
                row_ids = pq.read_table(p, columns=["row_id"]).column("row_id").to_pylist()
                ids.extend(row_ids)
                name = f"part-{stable_id(ds, *sorted(row_ids), length=20)}.parquet"
                dest = self.output_dir / ds / f"run_date={self.run_date}" / name
                plan.setdefault(ds, []).append([str(p.relative_to(self.root)), str(dest.relative_to(self.output_dir))])
        _write_parquet(pa.table({"row_id": pa.array(sorted(set(ids)), pa.string())}), self.root / "row_ids.parquet")
        commit = {"run_key": self.run_key, "run_date": self.run_date, "plan": plan, "manifest": manifest}
        path = self.root / COMMIT
        _write_text(path, json.dumps(commit, indent=1, default=str))
        return path

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _remove_rows(part: Path, ids: set[str], tmp_dir: Path) -> None:
    """Rewrite `part` without rows whose row_id is in `ids` (delete it if nothing remains)."""
    table = pq.read_table(part)
    keep = pa.array([rid not in ids for rid in table.column("row_id").to_pylist()], pa.bool_())
    kept = table.filter(keep)
    if kept.num_rows == table.num_rows:
        return
    if kept.num_rows == 0:
        part.unlink()
        return
    tmp = tmp_dir / f"{part.parent.parent.name}-{part.parent.name}-{part.name}"
    _write_parquet(kept, tmp)
    os.replace(tmp, part)


def publish_committed(staging_root: Path, output_dir: Path) -> dict[str, Any]:
    """Roll a committed staging directory forward into the published datasets. Idempotent."""
    commit = json.loads((staging_root / COMMIT).read_text())
    new_ids = set(pq.read_table(staging_root / "row_ids.parquet").column("row_id").to_pylist())
    destinations = {output_dir / dest for entries in commit["plan"].values() for _, dest in entries}
    tmp_dir = staging_root / "rewrite"
    tmp_dir.mkdir(exist_ok=True)
    for ds in DATASETS:  # upsert: older copies of these units go away first
        for part in published_parts(output_dir, ds):
            if part in destinations:
                continue
            present = set(pq.read_table(part, columns=["row_id"]).column("row_id").to_pylist())
            if present & new_ids:
                _remove_rows(part, new_ids, tmp_dir)
    for ds, entries in commit["plan"].items():
        for src, dest in entries:
            s, d = staging_root / src, output_dir / dest
            if s.exists():
                d.parent.mkdir(parents=True, exist_ok=True)
                os.replace(s, d)
    manifest_path = output_dir / MANIFESTS / f"run_date={commit['run_date']}" / f"manifest-{commit['run_key']}.json"
    _write_text(manifest_path, json.dumps(commit["manifest"], indent=1, default=str))
    shutil.rmtree(staging_root, ignore_errors=True)
    return commit["manifest"]


def roll_forward(output_dir: Path) -> list[str]:
    """Finish publishing every committed-but-unpublished run (after a crash). Returns their keys."""
    rolled = []
    root = output_dir / STAGING
    if root.is_dir():
        for st in sorted(root.iterdir()):
            if st.is_dir() and (st / COMMIT).exists():
                publish_committed(st, output_dir)
                rolled.append(st.name)
    return rolled


def drop_stale(output_dir: Path, keep: str) -> list[str]:
    """Remove uncommitted staging of other run keys (inputs, model or prompt changed since)."""
    dropped = []
    root = output_dir / STAGING
    if root.is_dir():
        for st in sorted(root.iterdir()):
            if st.is_dir() and st.name != keep and not (st / COMMIT).exists():
                shutil.rmtree(st, ignore_errors=True)
                dropped.append(st.name)
    return dropped
