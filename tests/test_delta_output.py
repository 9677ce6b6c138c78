"""`--table-format delta`: each dataset as a Delta Lake table holding exactly the Parquet layout's rows, one commit
per changed run_date partition with the run's manifest as commit metadata, idempotent on a re-run, on a local path
and on an S3-compatible object store (moto's server on 127.0.0.1)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from pipeline.cli import main as cli
from pipeline.config import RunConfig
from pipeline.output.datasets import DATASETS
from pipeline.output.sink import read_dataset
from pipeline.run import run_pipeline
from tests.helpers.fake_llm import FakeLLM
from tests.helpers.pipeline_inputs import write_sample_inputs


def _run(inp: Path, out: Path, model: Path, date: str, **kw: object):
    cfg = RunConfig(input_dir=inp, output_dir=out, model_dir=model, run_date=date, progress=False,
                    table_format="delta", **kw)
    return run_pipeline(cfg, llm=FakeLLM())


def _same_rows(out: Path, uri: str, options: dict[str, str] | None = None) -> None:
    for ds in DATASETS:
        parquet = read_dataset(out, ds)
        try:
            delta = DeltaTable(f"{uri}/{ds}", storage_options=options).to_pyarrow_table()
        except Exception:  # noqa: BLE001 - a dataset the runs never wrote has no table
            assert parquet.num_rows == 0, ds
            continue
        pairs = sorted(zip(delta.column("row_id").to_pylist(), delta.column("run_date").to_pylist()))
        assert pairs == sorted(zip(parquet.column("row_id").to_pylist(), parquet.column("run_date").to_pylist())), ds


def test_delta_tables_mirror_the_parquet_layout_and_rerun_idempotently(tmp_path: Path, fake_model: Path) -> None:
    inp, out = tmp_path / "in", tmp_path / "out"
    write_sample_inputs(inp)
    first = _run(inp, out, fake_model, "2024-05-01")
    uri = str(out / "delta")
    assert first.table_uri == uri and "documents/run_date=2024-05-01" in first.delta_partitions
    _same_rows(out, uri)
    docs = DeltaTable(f"{uri}/documents")
    assert docs.metadata().partition_columns == ["run_date"]
    history = docs.history()[0]
    assert history["pipeline.run_key"] == first.run_key
    assert json.loads(history["pipeline.manifest"])["reconciliation"]["balanced"]
    # typed columns survive: polars reads them through the Delta log
    frame = pl.scan_delta(f"{uri}/documents").collect()
    assert frame.schema["amount"] == pl.Decimal(18, 2) and frame.schema["date"] == pl.Date
    assert frame.height == read_dataset(out, "documents").num_rows
    versions = {ds: DeltaTable(f"{uri}/{ds}").version() for ds in ("documents", "transactions")}

    again = _run(inp, out, fake_model, "2024-05-01")  # nothing changed: no commit
    assert again.delta_partitions == []
    assert {ds: DeltaTable(f"{uri}/{ds}").version() for ds in versions} == versions

    # a log that grew: its rows are superseded in the Parquet layout, and the Delta table follows in one commit
    with (inp / "logs" / "de_bank.csv").open("a", encoding="cp1252") as f:
        f.write("30.03.2024;-12,34;EUR;Bäckerei;Brot\n")
    grown = _run(inp, out, fake_model, "2024-05-02")
    assert grown.delta_partitions
    _same_rows(out, uri)
    tx = DeltaTable(f"{uri}/transactions")
    assert tx.version() > versions["transactions"]
    old = DeltaTable(f"{uri}/transactions", version=versions["transactions"]).to_pyarrow_table()
    assert old.num_rows < tx.to_pyarrow_table().num_rows  # time travel reads the state before the growth


def test_a_table_an_older_version_made_takes_the_columns_that_became_nullable(tmp_path: Path,
                                                                              fake_model: Path) -> None:
    from deltalake import write_deltalake

    from pipeline.output.datasets import dataset_schema

    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    (inp / "card.csv").write_text("Date,Description,Amount\n03/15/2024,Coffee,-4.50\n")  # states no currency
    uri = out / "delta" / "transactions"
    schema = dataset_schema("transactions")  # as versions before currency became nullable wrote it
    old = pa.schema([f.with_nullable(False) if f.name == "currency" else f for f in schema]
                    + [pa.field("run_date", pa.string(), nullable=False)])
    write_deltalake(str(uri), old.empty_table(), partition_by=["run_date"])
    run = _run(inp, out, fake_model, "2024-05-01")
    assert "transactions/run_date=2024-05-01" in run.delta_partitions
    assert DeltaTable(str(uri)).to_pyarrow_table().column("currency").to_pylist() == [None]
    _same_rows(out, str(out / "delta"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def s3_server() -> Iterator[dict[str, str]]:
    """moto's S3 server in its own process (in this one, delta-rs' blocking reads and the server's thread would
    share the GIL)."""
    boto3 = pytest.importorskip("boto3")
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                              aws_secret_access_key="testing", region_name="us-east-1")
        deadline = time.monotonic() + 60
        while True:
            try:
                client.create_bucket(Bucket="lake")
                break
            except Exception:  # noqa: BLE001 - the server is still starting
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        yield {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
               "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}  # one writer: the run holds its output folder's lock
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_delta_tables_on_an_s3_compatible_store(tmp_path: Path, fake_model: Path, s3_server: dict[str, str]) -> None:
    inp, out = tmp_path / "in", tmp_path / "out"
    write_sample_inputs(inp)
    summary = _run(inp, out, fake_model, "2024-05-01", table_uri="s3://lake/finance", storage_options=s3_server)
    assert summary.delta_partitions
    _same_rows(out, "s3://lake/finance", s3_server)
    docs = DeltaTable("s3://lake/finance/documents", storage_options=s3_server)
    assert docs.history()[0]["pipeline.run_key"] == summary.run_key
    frame = pl.scan_delta("s3://lake/finance/documents", storage_options=s3_server).collect()
    assert frame.height == read_dataset(out, "documents").num_rows and frame.schema["date"] == pl.Date
    again = _run(inp, out, fake_model, "2024-05-01", table_uri="s3://lake/finance", storage_options=s3_server)
    assert again.delta_partitions == [] and DeltaTable("s3://lake/finance/documents",
                                                       storage_options=s3_server).version() == docs.version()


def test_the_cli_takes_the_table_options_and_says_what_it_wrote(tmp_path: Path, fake_model: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    inp, out = tmp_path / "in", tmp_path / "out"
    write_sample_inputs(inp)
    assert cli(["run", "--input", str(inp), "--output", str(out), "--model", str(fake_model), "--no-progress",
                "--table-format", "delta", "--storage-option", "NOT-A-PAIR"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().out


def test_a_sync_cut_short_leaves_each_table_at_its_last_commit_and_the_next_run_finishes_it(
        tmp_path: Path, fake_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import deltalake

    inp, out = tmp_path / "in", tmp_path / "out"
    write_sample_inputs(inp)
    _run(inp, out, fake_model, "2024-05-01")
    uri = str(out / "delta")
    before = {ds: DeltaTable(f"{uri}/{ds}").version() for ds in ("documents", "transactions")}
    real, calls = deltalake.write_deltalake, []

    def dies_after_one(*args: object, **kwargs: object) -> None:  # the process dies before its second commit
        if calls:
            raise KeyboardInterrupt
        calls.append(args[0])
        real(*args, **kwargs)

    monkeypatch.setattr(deltalake, "write_deltalake", dies_after_one)
    with (inp / "logs" / "de_bank.csv").open("a", encoding="cp1252") as f:
        f.write("30.03.2024;-12,34;EUR;Bäckerei;Brot\n")
    with pytest.raises(KeyboardInterrupt):
        _run(inp, out, fake_model, "2024-05-02")
    # every table is readable at a whole commit: the one committed partition, or none
    for ds, version in before.items():
        table = DeltaTable(f"{uri}/{ds}")
        assert table.version() in (version, version + 1)
        table.to_pyarrow_table()
    monkeypatch.setattr(deltalake, "write_deltalake", real)
    finished = _run(inp, out, fake_model, "2024-05-02")  # the Parquet side is published: only the sync remains
    assert finished.delta_partitions
    _same_rows(out, uri)
