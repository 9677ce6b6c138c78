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
    read_bytes = Path.read_bytes

    def failing_read(self: Path) -> bytes:
        if self.name == "b.csv":
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(self))
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", failing_read)
    res = ingest(tmp_path)
    assert res.files.num_rows == 3 and res.transactions.num_rows == 2
    err = res.errors.to_pylist()
    assert [(e["source_file"], e["error_class"]) for e in err] == [("b.csv", "UnreadableFile")]
    assert "Input/output error" in err[0]["message"]
