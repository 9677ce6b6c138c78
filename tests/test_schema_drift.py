"""Output written by an older schema version (issue 43): a run refuses to publish beside it, `pipeline migrate`
rewrites it atomically, polars and DuckDB then read each dataset with one schema, and `inspect` says what is
mixed. The older version is made here from a current run's parts, the way the previous releases differed: a
column they did not record yet (ocred_pages), a window amount stored as a float, and a document's date and amount
stored as text (before schema 3.0)."""

from __future__ import annotations

import io
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from pipeline.cli import main as cli
from pipeline.config import RunConfig
from pipeline.output.report import inspect_output
from pipeline.output.schema_drift import SchemaDriftError, find_drift
from pipeline.output.sink import published_parts
from pipeline.run import run_pipeline
from tests.helpers.fake_llm import FakeLLM
from tests.helpers.pipeline_inputs import write_sample_inputs


def _run(inp: Path, out: Path, model: Path, date: str) -> None:
    cfg = RunConfig(input_dir=inp, output_dir=out, model_dir=model, run_date=date, progress=False)
    run_pipeline(cfg, llm=FakeLLM())


def _make_older(out: Path) -> None:
    """Rewrite the published parts as the previous schema version wrote them."""
    for part in published_parts(out, "documents"):
        t = pq.read_table(part)
        t = t.drop_columns(["ocred_pages"])
        for name in ("date", "amount"):
            t = t.set_column(t.schema.get_field_index(name), name, pc.cast(t.column(name), pa.string()))
        t = t.set_column(t.schema.get_field_index("schema_version"), "schema_version",
                         pa.array(["2.1.0"] * t.num_rows, pa.string()))
        pq.write_table(t, part)
    for part in published_parts(out, "account_windows"):
        t = pq.read_table(part)
        i = t.schema.get_field_index("credits")
        t = t.set_column(i, "credits", pc.cast(t.column("credits"), pa.float64()))
        pq.write_table(t, part)


@pytest.fixture()
def older_output(tmp_path: Path, fake_model: Path) -> tuple[Path, Path]:
    inp, out = tmp_path / "in", tmp_path / "out"
    write_sample_inputs(inp)
    _run(inp, out, fake_model, "2024-05-01")
    _make_older(out)
    (inp / "logs" / "late.csv").write_text("date,amount,currency,account\n2024-03-09,29232.37,EUR,ACC-9\n")
    return inp, out


def test_a_run_refuses_to_publish_beside_an_older_schema(older_output: tuple[Path, Path], fake_model: Path) -> None:
    inp, out = older_output
    before = {p.name for ds in ("documents", "transactions") for p in published_parts(out, ds)}
    with pytest.raises(SchemaDriftError, match=r"documents: 1 part of schema 2\.1\.0 \(missing ocred_pages, date: "
                       r"string, now date32\[day\], amount: string, now decimal128\(18, 2\)\).*"
                       r"credits: double, now decimal.*pipeline migrate --output"):
        _run(inp, out, fake_model, "2024-05-02")
    assert {p.name for ds in ("documents", "transactions") for p in published_parts(out, ds)} == before


def test_migrate_then_polars_and_duckdb_read_one_schema_with_exact_amounts(
        older_output: tuple[Path, Path], fake_model: Path) -> None:
    inp, out = older_output
    assert cli(["migrate", "--output", str(out), "--dry-run"]) == 0
    assert find_drift(out)  # a dry run changes nothing
    assert cli(["migrate", "--output", str(out)]) == 0
    assert not find_drift(out)
    _run(inp, out, fake_model, "2024-05-02")  # and runs publish again
    docs = pl.scan_parquet(str(out / "documents" / "**" / "*.parquet"), hive_partitioning=True).collect()
    assert docs.height == 3 and docs["ocred_pages"].null_count() == 3  # not recorded then: unknown, not []
    assert sorted(set(docs["schema_version"].to_list()))[0] == "2.1.0"  # rows keep the version that wrote them
    assert docs.schema["date"] == pl.Date and docs.schema["amount"] == pl.Decimal(18, 2)
    assert docs["amount"].null_count() < docs.height and docs["date"].null_count() < docs.height
    doc_glob = str(out / "documents" / "**" / "*.parquet")
    doc_types = duckdb.connect().execute(f"SELECT DISTINCT typeof(date), typeof(amount) FROM read_parquet("
                                         f"'{doc_glob}', hive_partitioning=true)").fetchall()
    assert doc_types == [("DATE", "DECIMAL(18,2)")]
    windows = pl.scan_parquet(str(out / "account_windows" / "**" / "*.parquet"), hive_partitioning=True).collect()
    assert windows.schema["credits"] == pl.Decimal(18, 2)
    con = duckdb.connect()
    glob = str(out / "account_windows" / "**" / "*.parquet")
    types = {r[0] for r in con.execute(f"SELECT DISTINCT typeof(credits) FROM read_parquet('{glob}', "
                                       "hive_partitioning=true, union_by_name=false)").fetchall()}
    assert types == {"DECIMAL(18,2)"}
    credits = {str(r[0]) for r in con.execute(f"SELECT credits FROM read_parquet('{glob}')").fetchall()}
    assert {"2500.00", "29232.37"} <= credits


def test_inspect_reports_the_older_parts_and_the_mixed_rows(older_output: tuple[Path, Path]) -> None:
    _, out = older_output
    buf = io.StringIO()
    inspect_output(out, Console(file=buf, width=200))
    text = buf.getvalue()
    assert "documents: 1 part of an older schema (2.1.0; missing ocred_pages, date: string, now date32[day], " \
           "amount: string, now decimal128(18, 2))" in text
    assert "documents 2.1.0: 3" not in text  # one version per dataset is not "mixed"
    assert "pipeline migrate" in text
    assert cli(["migrate", "--output", str(out)]) == 0
    buf = io.StringIO()
    inspect_output(out, Console(file=buf, width=200))
    assert "older schema" not in buf.getvalue() and "several schema versions" not in buf.getvalue()


def test_a_column_the_current_schema_lacks_is_never_dropped(older_output: tuple[Path, Path]) -> None:
    _, out = older_output
    part = published_parts(out, "transactions")[0]
    t = pq.read_table(part)
    pq.write_table(t.append_column("legacy_note", pa.array(["x"] * t.num_rows)), part)
    assert cli(["migrate", "--output", str(out)]) == 1
    assert "legacy_note" in pq.read_schema(published_parts(out, "transactions")[0]).names
    assert not any(d.dataset == "documents" for d in find_drift(out))  # the other datasets were migrated
