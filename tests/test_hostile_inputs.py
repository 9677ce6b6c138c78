"""Hostile and awkward inputs end as output rows or error rows with a reason, never a crash or a silent loss
(issue 20). Every input here is generated in the test; none is copied from realdata."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import RunConfig
from pipeline.run import run_pipeline
from pipeline.sink import read_dataset
from tests.helpers.fake_llm import FakeLLM


def _run(inp: Path, out: Path, model: Path, **kw: object):  # type: ignore[no-untyped-def]
    cfg = RunConfig(input_dir=inp, output_dir=out, model_dir=model, run_date="2024-05-01", progress=False, **kw)
    return run_pipeline(cfg, llm=FakeLLM())


def _errors(out: Path) -> list[dict]:
    return read_dataset(out, "errors").to_pylist()


def test_a_window_sum_beyond_its_decimal_type_is_an_error_row_before_inference(tmp_path: Path, fake_model: Path) -> None:
    """101 maximal credits in one account-month: each row fits decimal(18,4), their sum does not fit the window's
    decimal(18,2); the window becomes an error row (no model call), the run and its re-run finish balanced."""
    inp = tmp_path / "in"
    inp.mkdir()
    rows = "".join(f"2024-03-{1 + i % 28:02d},99999999999999.99,EUR,ACME,big {i},ACC-1\n" for i in range(101))
    rows += "2024-04-02,12.50,EUR,Shop,small,ACC-1\n"
    (inp / "big.csv").write_text("date,amount,currency,counterparty,description,account\n" + rows)
    for _ in range(2):
        s = _run(inp, tmp_path / "out", fake_model)
        assert s.reconciliation["balanced"]
    errs = [e for e in _errors(tmp_path / "out") if e["unit"] == "window"]
    assert [(e["error_class"], e["n_rows"], e["stage"]) for e in errs] == [("ValueOutOfRange", 101, "prepare")]
    assert "credits" in errs[0]["message"]
    assert read_dataset(tmp_path / "out", "account_windows").num_rows == 1  # April's window
    assert read_dataset(tmp_path / "out", "transactions").num_rows == 102
