"""One file that cannot be read, or whose name is not UTF-8, becomes its own error or row; the run goes on."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pipeline.ingest.discover import ingest

CSV = "date,description,amount,currency,account\n2024-01-02,Coffee,-3.50,EUR,DE89370400440532013000\n"


def test_a_non_utf8_file_name_is_read_and_named_printably(tmp_path: Path) -> None:
    (tmp_path / "ok.csv").write_text(CSV)
    with open(os.path.join(os.fsencode(tmp_path), b"\xe9t\xe9.csv"), "w") as f:  # Latin-1 "été"
        f.write(CSV.replace("Coffee", "Tea"))
    res = ingest(tmp_path)
    names = res.files.column("source_file").to_pylist()
    assert sorted(names) == ["\\xe9t\\xe9.csv", "ok.csv"]
    assert res.transactions.num_rows == 2 and res.errors.num_rows == 0


def test_an_unreadable_file_is_an_error_row_not_an_aborted_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("a.csv", "b.csv", "c.csv"):
        (tmp_path / name).write_text(CSV.replace("Coffee", name))
    from pipeline.ingest import discover

    read = discover.file_sha256

    def failing_read(path: Path) -> str:
        if Path(path).name == "b.csv":
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))
        return read(path)

    monkeypatch.setattr(discover, "file_sha256", failing_read)
    res = ingest(tmp_path)
    assert res.files.num_rows == 3 and res.transactions.num_rows == 2
    err = res.errors.to_pylist()
    assert [(e["source_file"], e["error_class"]) for e in err] == [("b.csv", "UnreadableFile")]
    assert "Input/output error" in err[0]["message"]


def test_hidden_and_underscore_files_are_skipped_with_an_error_row_each(tmp_path: Path) -> None:
    """A skipped file is still accounted for: listed in `files` (kind `skipped`) with a `Skipped` error row that
    says why, never silently dropped. The run's own output folder (`exclude`) stays out entirely."""
    (tmp_path / "ok.csv").write_text(CSV)
    (tmp_path / "_draft.csv").write_text(CSV)
    (tmp_path / ".hidden.csv").write_text(CSV)
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "x.pdf").write_bytes(b"%PDF-1.4")
    (tmp_path / "output").mkdir()
    (tmp_path / "output" / "part.parquet").write_bytes(b"PAR1")
    res = ingest(tmp_path, exclude=(tmp_path / "output",))
    files = {f["source_file"]: (f["kind"], f["status"]) for f in res.files.to_pylist()}
    assert files == {"ok.csv": ("transactions", "ok"), "_draft.csv": ("skipped", "skipped"),
                     ".hidden.csv": ("skipped", "skipped"), ".cache/x.pdf": ("skipped", "skipped")}
    errs = {e["source_file"]: (e["error_class"], e["unit"]) for e in res.errors.to_pylist()}
    assert errs == {name: ("Skipped", "file") for name in ("_draft.csv", ".hidden.csv", ".cache/x.pdf")}
    assert res.transactions.num_rows == 1


def test_explicit_exclude_globs_leave_files_out_without_error_rows_and_are_counted(tmp_path: Path) -> None:
    (tmp_path / "ok.csv").write_text(CSV)
    (tmp_path / "_draft.csv").write_text(CSV)
    (tmp_path / "notes.tmp").write_text("scratch")
    (tmp_path / "archive" / "2023").mkdir(parents=True)
    (tmp_path / "archive" / "2023" / "old.csv").write_text(CSV)
    (tmp_path / "archive_keep.csv").write_text(CSV.replace("Coffee", "Tea"))
    res = ingest(tmp_path, exclude=("*.tmp", "archive", "_draft.csv"))
    assert sorted(f["source_file"] for f in res.files.to_pylist()) == ["archive_keep.csv", "ok.csv"]
    assert res.errors.num_rows == 0 and res.excluded == 3


def test_exclude_reaches_the_manifest_from_the_cli(tmp_path: Path) -> None:
    from pipeline.cli import build_parser

    args = build_parser().parse_args(["run", "--input", str(tmp_path), "--exclude", "*.tmp", "--exclude", "old"])
    assert args.exclude == ["*.tmp", "old"]


def test_a_pipeline_run_with_skipped_files_still_reconciles(tmp_path: Path) -> None:
    from pipeline.config import RunConfig
    from pipeline.run import run_pipeline
    from tests.helpers.fake_llm import FakeLLM

    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "ok.csv").write_text(CSV)
    (inputs / "_skip.csv").write_text(CSV.replace("Coffee", "Tea"))
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    cfg = RunConfig(input_dir=inputs, output_dir=tmp_path / "out", model_dir=model, progress=False)
    m = run_pipeline(cfg, llm=FakeLLM()).manifest
    assert m["reconciliation"]["balanced"] and m["reconciliation"]["files"] == 2
    assert m["errors_by_class"].get("Skipped") == 1
    cfg = RunConfig(input_dir=inputs, output_dir=tmp_path / "out2", model_dir=model, progress=False,
                    exclude=["_skip.csv"])
    m = run_pipeline(cfg, llm=FakeLLM()).manifest
    assert m["reconciliation"]["balanced"] and m["reconciliation"]["files"] == 1
    assert "Skipped" not in m["errors_by_class"] and m["inputs"]["excluded"] == 1


def test_an_ingest_without_a_large_log_leaves_no_spool_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the spool folder used to be made for every ingest: a killed run left an empty one in the temp dir each time
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "log.csv").write_text("date,amount,currency\n2024-01-02,1.00,EUR\n", encoding="utf-8")
    res = ingest(inp)
    assert res.transactions.num_rows == 1 and not list(temp.glob("pipeline-spool-*"))
