"""Hostile and awkward inputs end as output rows or error rows with a reason, never a crash or a silent loss
(issue 20). Every input here is generated in the test; none is copied from realdata."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import RunConfig
from pipeline.output.sink import read_dataset
from pipeline.run import run_pipeline
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


HEADER = "date,amount,currency,counterparty,description,account\n"
GOOD = "2024-03-0{d},12.50,EUR,Shop,coffee,ACC-1\n"


def _read(text: str, name: str = "x.csv"):  # type: ignore[no-untyped-def]
    from pipeline.ingest.transactions import read_transactions

    return read_transactions(text.encode(), name, "sha", None)


def test_a_10_mb_field_costs_its_own_row_only() -> None:
    text = HEADER + GOOD.format(d=1) + '2024-03-02,1.00,EUR,Shop,"' + "x" * 10_000_000 + '",ACC-1\n' + GOOD.format(d=3)
    tf = _read(text)
    assert [r["source_row"] for r in tf.rows] == [2, 4]
    assert [(e.error_class, e.source_row, e.unit) for e in tf.errors] == [("BadRecord", 3, "row")]
    assert "field larger than field limit" in tf.errors[0].message


def test_cr_only_line_endings_are_read_row_by_row() -> None:
    tf = _read((HEADER + GOOD.format(d=1) + GOOD.format(d=2) + GOOD.format(d=3)).replace("\n", "\r"))
    assert [r["source_row"] for r in tf.rows] == [2, 3, 4] and not tf.errors


def test_a_quoted_field_over_two_lines_stays_one_record_next_to_a_broken_one() -> None:
    text = (HEADER + '2024-03-01,1.00,EUR,Shop,"two\nlines",ACC-1\n' + "2024-03-03,2.00,EUR,Shop,\"x\"y\"" + "z" * 200_000
            + '",ACC-1\n' + GOOD.format(d=5))
    tf = _read(text)
    assert [(r["source_row"], r["description"]) for r in tf.rows] == [(2, "two\nlines"), (5, "coffee")]
    assert [(e.error_class, e.source_row) for e in tf.errors] == [("BadRecord", 4)]


def test_a_100k_deep_json_line_is_one_bad_row() -> None:
    rec = '{{"date":"2024-03-0{d}","amount":"1.00","currency":"EUR","account":"A"}}\n'
    tf = _read(rec.format(d=1) + "[" * 100_000 + "]" * 100_000 + "\n" + rec.format(d=3), "x.jsonl")
    assert [r["source_row"] for r in tf.rows] == [1, 3]
    assert [(e.error_class, e.source_row) for e in tf.errors] == [("BadJSON", 2)]


def test_a_run_over_the_hostile_logs_reconciles_every_row(tmp_path: Path, fake_model: Path) -> None:
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "big_field.csv").write_text(HEADER + GOOD.format(d=1) + '2024-03-02,1,EUR,S,"' + "x" * 300_000 + '",A\n')
    (inp / "cr.csv").write_text((HEADER + GOOD.format(d=1) + GOOD.format(d=2)).replace("\n", "\r"))
    (inp / "deep.jsonl").write_text('{"date":"2024-03-01","amount":"1","currency":"EUR","account":"A"}\n'
                                    + "[" * 50_000 + "]" * 50_000 + "\n")
    m = _run(inp, tmp_path / "out", fake_model).manifest
    rec = m["reconciliation"]
    assert rec["balanced"] and rec["transaction_rows_output"] == 4 and rec["transaction_row_errors"] == 2


def test_a_parser_that_hangs_in_c_crashes_or_blows_memory_costs_only_its_file(tmp_path: Path) -> None:
    """Each misbehaving file becomes its own error row (the worker is killed and restarted); the good files
    around them are read. SIGALRM could interrupt none of these."""
    from pipeline.ingest import IngestLimits, ingest
    from pipeline.ingest.worker import FileWorker
    from tests.helpers.hostile_parsers import hostile_parse

    for name in ("a_ok.csv", "crash.csv", "hang.csv", "m_ok.csv", "oom.csv", "z_ok.csv"):
        (tmp_path / name).write_text(HEADER + GOOD.format(d=1).replace("coffee", name))
    limits = IngestLimits(parse_seconds=3, parse_seconds_per_mib=0, max_worker_memory_bytes=512 << 20)
    with FileWorker(limits, parser=hostile_parse) as worker:
        res = ingest(tmp_path, limits=limits, worker=worker)
    errs = {e["source_file"]: e["error_class"] for e in res.errors.to_pylist()}
    assert errs == {"crash.csv": "ParserCrashed", "hang.csv": "FileTimeout", "oom.csv": "MemoryLimit"}
    assert sorted(res.transactions.column("source_file").to_pylist()) == ["a_ok.csv", "m_ok.csv", "z_ok.csv"]
    assert res.files.num_rows == 6


def test_file_size_page_and_text_limits_are_error_rows(tmp_path: Path) -> None:
    from pipeline.ingest import IngestLimits, ingest
    from tests.helpers.pipeline_inputs import make_pdf

    (tmp_path / "big.csv").write_text(HEADER + GOOD.format(d=1) * 2000)
    (tmp_path / "small.csv").write_text(HEADER + GOOD.format(d=2))
    make_pdf(tmp_path / "pages.pdf", ["page one", "page two", "page three"])
    make_pdf(tmp_path / "wordy.pdf", ["word " * 400])
    make_pdf(tmp_path / "fine.pdf", ["short invoice"])
    res = ingest(tmp_path, limits=IngestLimits(max_file_bytes=20_000, max_pages=2, max_text_chars=1000))
    errs = {e["source_file"]: (e["error_class"], e["unit"]) for e in res.errors.to_pylist()}
    assert errs == {"big.csv": ("FileTooLarge", "file"), "pages.pdf": ("TooManyPages", "document"),
                    "wordy.pdf": ("TextTooLong", "document")}
    assert res.documents.column("source_file").to_pylist() == ["fine.pdf"] and res.transactions.num_rows == 1


def test_a_log_read_whole_must_fit_the_parsers_memory_limit(tmp_path: Path) -> None:
    """The size a whole-read log may have follows from the worker's memory limit and its format's measured peak
    per byte: a JSON export whose parse would not fit is refused before it is parsed, naming the memory limit;
    the same records as a delimited log are read in batches, and a small JSON export still reads."""
    import json

    from pipeline.ingest import IngestLimits, ingest

    records = [{"date": f"2024-03-{1 + i % 28:02d}", "amount": f"-{i}.50", "currency": "EUR",
                "description": f"card payment {i}"} for i in range(3000)]
    (tmp_path / "big.json").write_text(json.dumps({"transactions": records}))
    (tmp_path / "small.json").write_text(json.dumps({"transactions": records[:3]}))
    (tmp_path / "big.csv").write_text(HEADER + "".join(
        f"{r['date']},{r['amount']},EUR,Shop,{r['description']},ACC-1\n" for r in records))
    limits = IngestLimits(max_worker_memory_bytes=130 << 20, stream_log_bytes=100_000)
    res = ingest(tmp_path, limits=limits)
    errs = {e["source_file"]: e for e in res.errors.to_pylist()}
    assert set(errs) == {"big.json"}
    assert errs["big.json"]["error_class"] == "FileTooLarge" and "--max-worker-memory-mb" in errs["big.json"]["message"]
    rows = {f["source_file"]: f["n_rows"] for f in res.files.to_pylist()}
    assert rows == {"big.csv": 3000, "small.json": 3, "big.json": 0}


def test_every_log_format_has_a_measured_peak() -> None:
    from pipeline.ingest import formats
    from pipeline.ingest.limits import (
        WHOLE_READ_PEAK_PER_BYTE,
        WHOLE_READ_SECONDS_PER_MIB,
        IngestLimits,
    )

    names = {r.__name__.rsplit(".", 1)[-1] for r in formats.READERS}
    assert set(WHOLE_READ_PEAK_PER_BYTE) == names | {"parquet", "json", "jsonl", "delimited"}
    assert set(WHOLE_READ_SECONDS_PER_MIB) <= set(WHOLE_READ_PEAK_PER_BYTE)
    limits = IngestLimits()
    mib64 = 64 << 20
    assert limits.seconds_for(mib64, "ofx") == limits.parse_seconds + 64 * WHOLE_READ_SECONDS_PER_MIB["ofx"]
    assert limits.seconds_for(mib64, "delimited") == limits.seconds_for(mib64) == limits.parse_seconds + 64 * 3.0


def test_limits_are_set_from_the_cli(tmp_path: Path) -> None:
    from pipeline.cli import _limits, build_parser

    args = build_parser().parse_args(["run", "--input", str(tmp_path), "--max-file-mb", "1.5", "--max-pages", "9",
                                      "--parse-timeout", "7", "--max-worker-memory-mb", "700"])
    lim = _limits(args)
    assert (lim.max_file_bytes, lim.max_pages, lim.parse_seconds, lim.max_worker_memory_bytes) == \
        (int(1.5 * (1 << 20)), 9, 7.0, 700 << 20)
    assert lim.max_text_chars == 20_000_000


def _cli_run(inp: Path, out: Path, model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
             ) -> tuple[int, str]:
    import engine
    from pipeline import cli

    monkeypatch.setattr(engine, "LLM", lambda *a, **k: FakeLLM())
    monkeypatch.setattr(engine, "load_tokenizer", lambda _model: FakeLLM().tokenizer)
    code = cli.main(["run", "--input", str(inp), "--output", str(out), "--model", str(model), "--no-progress",
                     "--run-date", "2024-05-01"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_disk_full_mid_run_is_one_clear_line_and_the_rerun_loses_nothing(
        tmp_path: Path, fake_model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import errno

    import pyarrow.parquet as pq

    from tests.helpers.pipeline_inputs import write_sample_inputs

    inp, out = tmp_path / "in", tmp_path / "out"
    write_sample_inputs(inp)
    real_write, calls = pq.write_table, {"n": 0}

    def full_disk(table, where, **kw):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] >= 3:  # the first parts fit, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(table, where, **kw)

    with monkeypatch.context() as m:
        m.setattr(pq, "write_table", full_disk)
        code, text = _cli_run(inp, out, fake_model, monkeypatch, capsys)
    assert code == 4 and "Traceback" not in text
    line = next(ln for ln in text.splitlines() if "run failed" in ln)
    assert "disk full" in line and str(out) in line
    code, _ = _cli_run(inp, out, fake_model, monkeypatch, capsys)
    assert code == 0
    rerun = {ds: read_dataset(out, ds).num_rows for ds in ("documents", "account_windows", "transactions", "errors")}
    fresh = tmp_path / "fresh"
    assert _cli_run(inp, fresh, fake_model, monkeypatch, capsys)[0] == 0
    assert rerun == {ds: read_dataset(fresh, ds).num_rows for ds in rerun}


def test_an_output_path_that_is_a_file_or_read_only_is_one_clear_line(
        tmp_path: Path, fake_model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import errno

    from pipeline.output import sink

    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "a.csv").write_text(HEADER + GOOD.format(d=1))
    target = tmp_path / "out.txt"
    target.write_text("not a folder")
    code, text = _cli_run(inp, target, fake_model, monkeypatch, capsys)
    assert code == 4 and "Traceback" not in text and "is not a directory" in text and str(target) in text

    def read_only(*a, **k):  # type: ignore[no-untyped-def]  # root ignores chmod, so the kernel's answer is simulated
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "ro"))

    monkeypatch.setattr(sink.Path, "mkdir", read_only)
    code, text = _cli_run(inp, tmp_path / "ro", fake_model, monkeypatch, capsys)
    assert code == 4 and "Traceback" not in text and "read-only filesystem" in text and str(tmp_path / "ro") in text


def test_the_balance_is_counted_from_what_was_read_so_a_row_lost_later_unbalances_it(
        tmp_path: Path, fake_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row dropped after the readers (here: while the transactions dataset is built) must show: the manifest's
    rows_read comes from the readers' own count, not from outputs plus errors."""
    import pipeline.run as run

    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "a.csv").write_text(HEADER + GOOD.format(d=1) + GOOD.format(d=2) + "bad-date,1,EUR,S,x,A\n")
    assert _run(inp, tmp_path / "ok", fake_model).reconciliation["balanced"]
    real = run.transaction_rows
    monkeypatch.setattr(run, "transaction_rows", lambda t, *a: real(t.slice(1), *a))
    rec = _run(inp, tmp_path / "lossy", fake_model).reconciliation
    assert rec["transaction_rows_read"] == 3 and rec["transaction_rows_output"] == 1 and not rec["balanced"]


def test_the_time_allowed_grows_with_the_file_so_a_big_log_is_not_cut_off(tmp_path: Path) -> None:
    """A 1.6M-row log hit the old fixed 120 s limit and lost every row; the budget is now parse_seconds plus
    parse_seconds_per_mib. Scaled down: a 2.5 s parse of a 0.7 MiB file within 1 s + 10 s/MiB is read in full,
    and cut off at 1 s flat."""
    from pipeline.ingest import IngestLimits, ingest
    from pipeline.ingest.worker import FileWorker
    from tests.helpers.hostile_parsers import hostile_parse

    (tmp_path / "slow.csv").write_text(HEADER + GOOD.format(d=1) * 18_000)  # ~0.7 MiB
    limits = IngestLimits(parse_seconds=1, parse_seconds_per_mib=10)
    with FileWorker(limits, parser=hostile_parse) as worker:
        res = ingest(tmp_path, limits=limits, worker=worker)
    assert res.errors.num_rows == 0 and res.transactions.num_rows == 18_000
    tight = IngestLimits(parse_seconds=1, parse_seconds_per_mib=0)
    with FileWorker(tight, parser=hostile_parse) as worker:
        res = ingest(tmp_path, limits=tight, worker=worker)
    assert res.errors.column("error_class").to_pylist() == ["FileTimeout"]
