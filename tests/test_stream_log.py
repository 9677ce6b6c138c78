"""Large logs read in batches (issue 39): the same rows, row errors and line numbers as the whole-file reader,
whatever the batch size, with the layout decided on the head."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.ingest.stream_log import stream_transactions
from pipeline.ingest.transactions import (
    read_transactions,
    rows_to_table,
    transaction_row_id,
)

LOG = ("Kontoauszug DE02120300000000202051\n\n"
       "Buchungstag;Verwendungszweck;Betrag;Währung\n"
       "01.03.2024;Miete März;-900,00;EUR\n"
       "02.03.2024;REWE Markt;-45,10;EUR\n"
       ";Filiale 0815 Berlin;;\n"  # wraps the line above
       "03.03.2024;Gehalt;2.500,00;EUR\n"
       "04.03.2024;kaputt;abc;EUR\n"  # a bad amount
       '05.03.2024;"offenes Anführungszeichen;-1,00;EUR\n'
       "06.03.2024;Bäcker;-3,20;EUR\r"  # a CR-only line end
       "07.03.2024;Kino;-12,00;EUR\n"
       "Summe;;1.550,70;EUR\n")


@pytest.mark.parametrize("batch_rows", [1, 2, 3, 1000])
def test_streamed_rows_and_errors_equal_the_whole_file_reader(tmp_path: Path, batch_rows: int) -> None:
    path = tmp_path / "umsaetze.csv"
    data = LOG.encode("cp1252")
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    whole = read_transactions(data, "umsaetze.csv", sha)
    streamed, n = stream_transactions(path, "umsaetze.csv", sha, tmp_path / "spool.parquet", batch_rows=batch_rows)
    spooled = pq.read_table(tmp_path / "spool.parquet")
    assert spooled.drop_columns(["row_id"]).to_pylist() == rows_to_table(whole.rows).to_pylist()
    assert spooled.column("row_id").to_pylist() == [transaction_row_id(sha, r["source_row"]) for r in whole.rows]
    assert n == len(whole.rows) and n > 0
    assert [(e.source_row, e.error_class, e.message) for e in streamed.errors] == [
        (e.source_row, e.error_class, e.message) for e in whole.errors]
    assert streamed.n_records == whole.n_records == n + len(streamed.errors)


def test_layout_is_decided_on_the_head_and_applied_to_the_whole_file(tmp_path: Path) -> None:
    lines = ["Date,Description,Amount,Currency"] + [f"2024-01-{d % 28 + 1:02d},row {d},-{d}.50,EUR" for d in range(5000)]
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "big.csv"
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    out, n = stream_transactions(path, "big.csv", sha, tmp_path / "s.parquet", head_bytes=4096, batch_rows=700)
    assert n == 5000 and not out.errors and out.details["streamed"]["head_bytes"] <= 4096
    rows = pq.read_table(tmp_path / "s.parquet")
    assert rows.column("source_row").to_pylist() == list(range(2, 5002))


JSONL = ('{"date": "2024-03-01", "amount": {"value": -900.0, "currency": "EUR"}, "counterparty": "Vermieter"}\n'
         '{"date": "2024-03-02", "amount": {"value": -45.1, "currency": "EUR"}, "counterparty": "REWE", '
         '"tags": ["food", "card"]}\n'
         '\n'  # a blank line: no record
         '{"date": "2024-03-03", "amount": {"value": 2500, "currency": "EUR"}, "counterparty": "Arbeitgeber"}\r'
         '{"date": "2024-03-04", "amount": {"value": "abc", "currency": "EUR"}, "counterparty": "kaputt"}\n'
         '{"date": "2024-03-05", "amount": \n'  # a record cut short
         '[1, 2, 3]\n'  # no object
         '{"date": "2024-03-06", "amount": {"value": -3.2, "currency": "EUR"}, "counterparty": "B\u00e4cker \u2028 Ost"}\r\n'
         '{"date": "2024-03-07", "amount": {"value": -12, "currency": "EUR"}, "counterparty": "Kino"}\n')


@pytest.mark.parametrize("batch_rows", [1, 2, 1000])
def test_json_lines_stream_to_the_rows_and_errors_of_the_whole_file_reader(tmp_path: Path, batch_rows: int) -> None:
    path = tmp_path / "activity.jsonl"
    data = JSONL.encode()
    path.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    whole = read_transactions(data, "activity.jsonl", sha)
    streamed, n = stream_transactions(path, "activity.jsonl", sha, tmp_path / "spool.parquet", batch_rows=batch_rows)
    spooled = pq.read_table(tmp_path / "spool.parquet")
    assert spooled.drop_columns(["row_id"]).to_pylist() == rows_to_table(whole.rows).to_pylist()
    assert n == len(whole.rows) == 5
    assert [(e.source_row, e.error_class, e.message) for e in streamed.errors] == [
        (e.source_row, e.error_class, e.message) for e in whole.errors]
    assert [e.source_row for e in streamed.errors] == [5, 6, 7]
    assert streamed.n_records == whole.n_records == 8


def test_a_large_json_lines_log_is_read_in_batches(tmp_path: Path) -> None:
    from pipeline.ingest import ingest
    from pipeline.ingest.limits import IngestLimits

    root = tmp_path / "in"
    root.mkdir()
    lines = [f'{{"booked": "2024-01-{d % 28 + 1:02d}", "amount": -{d}.5, "currency": "EUR", "payee": "p{d}"}}'
             for d in range(3000)]
    (root / "export.jsonl").write_text("\n".join(lines) + "\n")
    result = ingest(root, limits=IngestLimits(stream_log_bytes=1024))
    assert result.transactions.num_rows == 0 and [s.n_rows for s in result.spooled] == [3000]


_SPOOL_PEAK = r"""
import sys
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
from pipeline.ingest.stream_log import SPOOL_SCHEMA
from pipeline.output.sink import Staging, any_published, published_transactions_of, publish_committed, unpublished
from pipeline.plan.work import transaction_batches

groups, rows, root = int(sys.argv[1]), 20_000, Path(sys.argv[2])
spool = root / f"spool{groups}.parquet"
with pq.ParquetWriter(str(spool), SPOOL_SCHEMA) as w:
    for g in range(groups):
        n = range(g * rows, (g + 1) * rows)
        w.write_table(pa.table({
            "row_id": [f"{i:064x}" for i in n], "account": [f"DE{i % 50:020d}" for i in n],
            "timestamp": pa.array([i * 60_000_000 for i in n], pa.timestamp("us", "UTC")),
            "amount": pa.array([i % 1000 for i in n], pa.decimal128(18, 4)), "currency": ["EUR"] * rows,
            "counterparty": [f"shop {i % 997}" for i in n], "description": [f"card payment {i}" for i in n],
            "source_file": ["big.csv"] * rows, "source_row": list(n)}, schema=SPOOL_SCHEMA))
pool = pa.default_memory_pool()
base = pool.max_memory()
staging = Staging(root / f"out{groups}", "key", "2026-01-01")
staging.write_spool_part("p", spool, "ab" * 32, "3")
n = sum(df.height for df in transaction_batches(pa.table({}), {}, [type("S", (), {"path": spool})()]))
assert n == groups * rows, n
staging.commit({})
publish_committed(staging.root, root / f"out{groups}")
out = root / f"out{groups}"
assert pq.ParquetFile(next((out / "transactions").rglob("*.parquet"))).metadata.num_rows == n
# a later run's checks against the published log: its first id, its rows of some accounts
assert any_published(out, "transactions", [f"{n - 1:064x}"]) and not any_published(out, "transactions", ["x"])
assert unpublished(out, "transactions", pa.table({"row_id": [f"{n - 1:064x}", "x"]})).num_rows == 1
some = pa.array([f"DE{0:020d}"])
assert sum(t.num_rows for t in published_transactions_of(out, some, pa.array(["other.csv"]), set())) == n // 50
# a later run of the same date re-reads one of its rows: the live part is rewritten without it
again = root / f"again{groups}.parquet"
first = pq.ParquetFile(str(spool)).read_row_group(0).slice(0, 1)
pq.write_table(first.set_column(6, "description", pa.array(["corrected"])), str(again))
later = Staging(out, "key2", "2026-01-01")
later.write_spool_part("p", again, "cd" * 32, "3")
later.commit({})
publish_committed(later.root, out)
parts = list((out / "transactions").rglob("*.parquet"))
assert len(parts) == 2 and sum(pq.ParquetFile(p).metadata.num_rows for p in parts) == n
print(pool.max_memory() - base)
"""


def test_a_spool_is_read_with_the_same_memory_whatever_its_length(tmp_path: Path) -> None:
    """Staging a large log's spool, planning over it and publishing it read it batch by batch: pyarrow's
    whole-file batch reader kept pool memory for every row group it had passed (3.4 MB more per 65k-row group on
    a 4.2 M-row log: 253 MB), the commit and publish read all the run's row ids at once, and a later run's checks
    read the published log's ids or rows whole, and a later run of the same date rewrote the published part
    read whole, so memory grew with the file. Arrow's pool peak over 4 row groups and over 24 must match."""
    import subprocess
    import sys

    def peak(groups: int) -> int:
        out = subprocess.run([sys.executable, "-c", _SPOOL_PEAK, str(groups), str(tmp_path)], check=True,
                             capture_output=True, text=True)
        return int(out.stdout.split()[-1])

    short, long = peak(4), peak(24)
    assert long < short + 4 * 2**20, (short, long)
