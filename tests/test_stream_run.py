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
