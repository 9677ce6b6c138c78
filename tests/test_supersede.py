"""Re-runs and the identity of a row across runs (issue 43): one row per (file, record) per dataset, the latest
version of the file wins, in the same atomic publish; an account-month window is computed from all its
transactions and published once; rows never move between run dates, so every manifest stays true."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline.config import RunConfig
from pipeline.ingest import IngestLimits
from pipeline.output.sink import published_parts, read_dataset
from pipeline.run import run_pipeline
from tests.helpers.fake_llm import FakeLLM

HEADER = "date,amount,currency,counterparty,description,account\n"


def _rows(n: int, start: int = 0, account: str = "ACC-1", month: str = "2024-05") -> str:
    return "".join(f"{month}-{1 + i % 28:02d},-{i + 1}.00,EUR,Shop,item {i},{account}\n" for i in range(start, start + n))


def _run(inp: Path, out: Path, model: Path, date: str = "2024-06-01", **kw: object):  # type: ignore[no-untyped-def]
    cfg = RunConfig(input_dir=inp, output_dir=out, model_dir=model, run_date=date, progress=False, **kw)
    s = run_pipeline(cfg, llm=FakeLLM())
    assert s.reconciliation["balanced"], s.reconciliation
    return s


def _windows(out: Path) -> list[tuple[str, str, int]]:
    t = read_dataset(out, "account_windows")
    return sorted(zip(t.column("account").to_pylist(), [str(d) for d in t.column("period_start").to_pylist()],
                      t.column("tx_count").to_pylist()))


def test_a_file_that_failed_once_leaves_no_error_row_once_it_is_read(tmp_path: Path, fake_model: Path) -> None:
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    (inp / "log.csv").write_text(HEADER + _rows(300))
    _run(inp, out, fake_model, limits=IngestLimits(max_file_bytes=1000))  # too large this time
    assert read_dataset(out, "errors").column("error_class").to_pylist() == ["FileTooLarge"]
    _run(inp, out, fake_model)
    assert read_dataset(out, "errors").num_rows == 0
    assert read_dataset(out, "transactions").num_rows == 300


def test_a_late_file_gives_one_window_per_account_month(tmp_path: Path, fake_model: Path) -> None:
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    (inp / "a.csv").write_text(HEADER + _rows(14))
    _run(inp, out, fake_model)
    (inp / "b.csv").write_text(HEADER + _rows(1, start=14))
    _run(inp, out, fake_model)  # the same run date
    assert _windows(out) == [("ACC-1", "2024-05-01", 15)]
    assert read_dataset(out, "transactions").num_rows == 15


def test_a_growing_daily_log_counts_each_record_once(tmp_path: Path, fake_model: Path) -> None:
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    (inp / "daily.csv").write_text(HEADER + _rows(100))
    _run(inp, out, fake_model, date="2024-05-30")
    (inp / "daily.csv").write_text(HEADER + _rows(110))  # day 2 = day 1 + 10 rows
    _run(inp, out, fake_model, date="2024-05-31")
    tx = read_dataset(out, "transactions")
    assert tx.num_rows == 110 and len(set(tx.column("source_row").to_pylist())) == 110
    assert _windows(out) == [("ACC-1", "2024-05-01", 110)]


def test_a_window_counts_the_published_rows_of_files_no_longer_in_the_input(tmp_path: Path, fake_model: Path) -> None:
    """The nightly folder that holds only the new day's file: the month's window is over both days."""
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    (inp / "day1.csv").write_text(HEADER + _rows(5))
    _run(inp, out, fake_model, date="2024-05-05")
    (inp / "day1.csv").unlink()
    (inp / "day2.csv").write_text(HEADER + _rows(3, start=5))
    _run(inp, out, fake_model, date="2024-05-06")
    assert _windows(out) == [("ACC-1", "2024-05-01", 8)]
    win = read_dataset(out, "account_windows").to_pylist()[0]
    assert win["source_files"] == ["day1.csv", "day2.csv"] and str(win["debits"]) == "36.00"


def test_a_rerun_under_another_date_moves_no_row_and_every_manifest_stays_true(tmp_path: Path, fake_model: Path) -> None:
    from tests.helpers.pipeline_inputs import write_sample_inputs

    inp, out = tmp_path / "in", tmp_path / "out"
    write_sample_inputs(inp)
    _run(inp, out, fake_model, date="2024-05-01")
    first = {ds: read_dataset(out, ds).num_rows for ds in ("errors", "documents", "transactions")}
    _run(inp, out, fake_model, date="2024-05-02")
    for ds, n in first.items():
        assert read_dataset(out, ds).num_rows == n
    for manifest in (out / "manifests").glob("run_date=*/manifest-*.json"):
        m = json.loads(manifest.read_text())
        date = m["run_date"]
        for ds, n in m["outputs"].items():
            in_partition = sum(pl.read_parquet(p).height for p in published_parts(out, ds)
                               if p.parent.name == f"run_date={date}")
            assert in_partition == n, (date, ds, in_partition, n)
