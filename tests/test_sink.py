"""Parquet sink: staging, atomic publish, upserts, roll-forward after a crash, query engines."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq

from pipeline.datasets import dataset_schema, error_rows
from pipeline.errors import ErrorRecord
from pipeline.sink import COMMIT, Staging, drop_stale, publish_committed, published_ids, read_dataset, roll_forward

RUN = {"model_id": "m@1", "prompt_version": "p1", "schema_version": "1.0.0"}


def _errors(*ids: str, msg: str = "boom") -> object:
    return error_rows([ErrorRecord(row_id=i, unit="row", source_file="a.csv", source_row=n, stage="ingest",
                                   error_class="BadRow", message=msg) for n, i in enumerate(ids, 1)], RUN)


def _publish(out: Path, key: str, date: str, *ids: str, msg: str = "boom") -> Staging:
    st = Staging(out, key, date)
    st.write_part("ingest", {"errors": _errors(*ids, msg=msg)})
    st.commit({"run_key": key, "finished_at": date})
    publish_committed(st.root, out)
    return st


def test_publish_layout_compression_schema_and_readers(tmp_path: Path) -> None:
    _publish(tmp_path, "k1", "2024-05-01", "a", "b")
    parts = list((tmp_path / "errors" / "run_date=2024-05-01").glob("part-*.parquet"))
    assert len(parts) == 1
    meta = pq.ParquetFile(parts[0]).metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert pq.read_schema(parts[0]).remove_metadata().equals(dataset_schema("errors"))
    assert (tmp_path / "manifests" / "run_date=2024-05-01" / "manifest-k1.json").is_file()
    assert not (tmp_path / "_staging" / "k1").exists()
    df = pl.scan_parquet(str(tmp_path / "errors" / "**" / "*.parquet"), hive_partitioning=True).collect()
    assert sorted(df["row_id"].to_list()) == ["a", "b"] and df["run_date"].cast(pl.String).unique().to_list() == ["2024-05-01"]
    n = duckdb.sql(f"select count(*) from read_parquet('{tmp_path}/errors/*/*.parquet', hive_partitioning=true)").fetchall()
    assert n == [(2,)]


def test_upsert_replaces_rows_across_partitions(tmp_path: Path) -> None:
    _publish(tmp_path, "k1", "2024-05-01", "a", "b")
    _publish(tmp_path, "k2", "2024-05-02", "b", "c", msg="newer")
    t = read_dataset(tmp_path, "errors").to_pylist()
    by_id = {r["row_id"]: r for r in t}
    assert len(t) == 3 and set(by_id) == {"a", "b", "c"}
    assert by_id["b"]["message"] == "newer" and by_id["b"]["run_date"] == "2024-05-02"
    assert by_id["a"]["run_date"] == "2024-05-01"


def test_republishing_identical_rows_is_idempotent(tmp_path: Path) -> None:
    _publish(tmp_path, "k1", "2024-05-01", "a", "b")
    before = sorted(p.name for p in tmp_path.glob("errors/*/*.parquet"))
    _publish(tmp_path, "k1", "2024-05-01", "a", "b")
    assert sorted(p.name for p in tmp_path.glob("errors/*/*.parquet")) == before
    assert read_dataset(tmp_path, "errors").num_rows == 2


def test_committed_but_unpublished_run_rolls_forward(tmp_path: Path) -> None:
    st = Staging(tmp_path, "k9", "2024-05-03")
    st.write_part("ingest", {"errors": _errors("x")})
    st.commit({"run_key": "k9"})
    assert published_ids(tmp_path, ("errors",)) == set()  # crash here: nothing visible yet
    assert roll_forward(tmp_path) == ["k9"]
    assert published_ids(tmp_path, ("errors",)) == {"x"}
    assert roll_forward(tmp_path) == []


def test_uncommitted_staging_is_resumable_or_dropped(tmp_path: Path) -> None:
    old = Staging(tmp_path, "old", "2024-05-01")
    old.write_part("document-00000", {"errors": _errors("y")})
    mine = Staging(tmp_path, "mine", "2024-05-01")
    mine.write_part("document-00000", {"errors": _errors("z")})
    assert (tmp_path / "_staging" / "old" / COMMIT).exists() is False
    assert drop_stale(tmp_path, keep="mine") == ["old"]
    again = Staging(tmp_path, "mine", "2024-05-01")
    assert again.is_done("document-00000") and not again.is_done("document-00001")
