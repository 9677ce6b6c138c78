"""A run whose logs are read in batches (issue 39) publishes exactly what the whole-file run publishes: the same
transactions, windows, errors and reconciliation; a re-run adds nothing."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import RunConfig
from pipeline.ingest import IngestLimits, ingest
from pipeline.output.sink import read_dataset
from pipeline.run import run_pipeline
from tests.helpers.fake_llm import FakeLLM
from tests.helpers.pipeline_inputs import write_sample_inputs

DATASETS = ("transactions", "account_windows", "errors", "documents")


def _published(out: Path) -> dict[str, list[dict]]:
    return {ds: sorted((r for r in read_dataset(out, ds).to_pylist()), key=lambda r: r["row_id"]) for ds in DATASETS}


def _run(inputs: Path, out: Path, model: Path, **limits: int) -> dict:
    cfg = RunConfig(input_dir=inputs, output_dir=out, model_dir=model, run_date="2024-05-01", progress=False,
                    limits=IngestLimits(**limits))
    return run_pipeline(cfg, llm=FakeLLM()).manifest


def test_streamed_logs_publish_what_whole_file_reading_publishes(tmp_path: Path, fake_model: Path) -> None:
    inputs = tmp_path / "in"
    write_sample_inputs(inputs)
    spooled = ingest(inputs, limits=IngestLimits(stream_log_bytes=1)).spooled
    assert spooled and all(s.n_rows for s in spooled)  # the delimited logs were read in batches
    whole = _run(inputs, tmp_path / "whole", fake_model)
    streamed = _run(inputs, tmp_path / "streamed", fake_model, stream_log_bytes=1)  # every delimited log streams
    assert streamed["reconciliation"]["balanced"]
    assert streamed["reconciliation"] == whole["reconciliation"]
    a, b = _published(tmp_path / "whole"), _published(tmp_path / "streamed")
    assert a["transactions"] and a == b
    again = _run(inputs, tmp_path / "streamed", fake_model, stream_log_bytes=1)
    assert again["reconciliation"]["transaction_rows_output"] == 0
    assert _published(tmp_path / "streamed") == b


def test_an_export_that_states_no_currency_is_published_with_the_currency_empty(tmp_path: Path,
                                                                                 fake_model: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "card.csv").write_text("Date,Description,Amount\n03/15/2024,Coffee,-4.50\n03/20/2024,Refund,12.00\n"
                                     "03/25/2024,Books,-30.25\n")
    for name, limits in (("whole", {}), ("streamed", {"stream_log_bytes": 1})):
        manifest = _run(inputs, tmp_path / name, fake_model, **limits)
        assert manifest["reconciliation"]["balanced"] and manifest["errors_by_class"] == {}
        assert manifest["inputs"]["currency_unstated_rows"] == {"card.csv": 3}
        tx = read_dataset(tmp_path / name, "transactions").to_pylist()
        assert sorted((str(r["amount"]), r["currency"]) for r in tx) == [
            ("-30.2500", None), ("-4.5000", None), ("12.0000", None)]
        (window,) = read_dataset(tmp_path / name, "account_windows").to_pylist()
        assert (window["currency"], str(window["credits"]), str(window["debits"]), window["tx_count"]) == (
            None, "12.00", "34.75", 3)
