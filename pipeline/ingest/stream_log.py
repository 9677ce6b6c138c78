"""Large delimited and JSON Lines logs read in batches: the layout is decided on the file's head (encoding,
delimiter, header or the records' field names, column roles, date format, decimal mark), then every record of the
whole file is mapped with it, batch by batch, into a Parquet spool file. Memory stays that of one batch whatever
the file's size; rows, row errors and their line numbers are those the whole-file reader gives
(`read_transactions`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import ErrorRecord
from pipeline.ingest.profiles import BankProfile, profile_for
from pipeline.ingest.tabular import NotATable, RawTable, parse_delimited
from pipeline.ingest.text_lines import physical_lines
from pipeline.ingest.transactions import (
    NO_DATA_ROWS,
    TransactionFile,
    bad_record_errors,
    jsonl_record,
    log_format,
    map_rows,
    records_table,
    table_layout,
    transaction_row_id,
)
from schemas.transactions import TRANSACTION_ARROW_SCHEMA

HEAD_BYTES = 4 * 1024 * 1024  # what the layout is decided on
BATCH_ROWS = 50_000
# a spool file's rows: the canonical transaction columns, led by each row's id (computed here, batch by batch,
# so that nothing downstream has to hold a large log's rows or ids in Python)
SPOOL_SCHEMA = pa.schema([pa.field("row_id", pa.string(), nullable=False), *TRANSACTION_ARROW_SCHEMA])


class _CountedLines:
    """The text's physical lines (ending at LF, CRLF or CR, as the whole-file reader splits them), counted."""

    def __init__(self, text: io.TextIOBase) -> None:
        self._text = text
        self.count = 0

    def __iter__(self) -> Iterator[str]:
        for line in self._text:
            self.count += 1
            yield line


def _head(path: str | Path, head_bytes: int) -> bytes:
    """The file's first `head_bytes`, cut after their last line break when the file goes on."""
    with open(path, "rb") as f:
        head = f.read(head_bytes)
        whole = not f.read(1)
    if not whole:
        cut = max(head.rfind(b"\n"), head.rfind(b"\r"))
        if cut < 0:
            raise NotATable(f"no line break in the first {head_bytes:,} bytes: not a line-oriented export")
        head = head[: cut + 1]
    return head


# What a record source yields: a record's (first line, values in the head table's column order), or a row error.
Record = tuple[int, list[Any]] | ErrorRecord


def _delimited(path: str | Path, head: bytes, source_file: str, sha: str,
               profiles: tuple[BankProfile, ...]) -> tuple[RawTable, Iterator[Record]]:
    """The head as a table (delimiter, header, encoding), and every record of the file after the header."""
    table = parse_delimited(head, profile_for(source_file, profiles))
    first_line = min([table.rows[0][0], *(line for line, _ in table.bad_records[:1])]) if table.rows else 1

    def records() -> Iterator[Record]:
        with open(path, "rb") as raw, io.TextIOWrapper(raw, encoding=table.encoding or "utf-8", errors="replace",
                                                       newline="") as text:
            lines = _CountedLines(text)
            it = iter(lines)
            for _ in range(first_line - 1):  # the preamble and the header
                if next(it, None) is None:
                    return
            reader = csv.reader(it, delimiter=table.delimiter or ",")
            while True:
                start = lines.count + 1
                try:
                    rec = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    yield from bad_record_errors(sha, source_file,
                                                 [(start, f"malformed CSV record at line {start}: {exc}")])
                    continue
                if rec and any(c.strip() for c in rec):
                    yield start, rec

    return table, records()


def _json_lines(path: str | Path, head: bytes, source_file: str, sha: str) -> tuple[RawTable, Iterator[Record]]:
    """The head's records as a table (their field names decide the columns), and every line of the file as a
    record in those columns or its row error. A field first seen after the head has no column, as a header row's
    columns are those it names."""
    head_records = []
    for i, line in enumerate(physical_lines(head.decode("utf-8-sig", errors="replace")), start=1):
        rec = jsonl_record(line, i, source_file, sha)
        if isinstance(rec, dict):
            head_records.append((i, rec))
    table = records_table(head_records)

    def records() -> Iterator[Record]:
        with open(path, "rb") as raw, io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace",
                                                       newline="") as text:
            for i, line in enumerate(text, start=1):  # lines end at CR, LF or CRLF, as physical_lines splits them
                rec = jsonl_record(line, i, source_file, sha)
                if isinstance(rec, dict):
                    yield i, [rec.get(k) for k in table.header]
                elif rec is not None:
                    yield rec

    return table, records()


def stream_transactions(path: str | Path, source_file: str, sha: str, spool: str | Path,
                        default_currency: str | None = None, profiles: tuple[BankProfile, ...] = (),
                        head_bytes: int = HEAD_BYTES, batch_rows: int = BATCH_ROWS) -> tuple[TransactionFile, int]:
    """(the file's row errors, details and record count, rows written to `spool`) of a delimited or JSON Lines
    log. The rows go to `spool`, a Parquet file of `SPOOL_SCHEMA`, never to memory. Raises NotATable like
    `read_transactions` when the head shows no table."""
    head = _head(path, head_bytes)
    if log_format(source_file, head).name == "jsonl":
        table, records = _json_lines(path, head, source_file, sha)
    else:
        table, records = _delimited(path, head, source_file, sha, profiles)
    if not table.rows:
        raise NotATable(NO_DATA_ROWS)
    layout = table_layout(table, source_file, sha, default_currency)
    out = TransactionFile(details={**layout.details, "streamed": {"head_bytes": len(head), "batch_rows": batch_rows}})
    written = 0
    source_errors: list[ErrorRecord] = []
    with pq.ParquetWriter(str(spool), SPOOL_SCHEMA) as writer:
        batch = TransactionFile()
        chunk: list[tuple[int, list[Any]]] = []
        n_rows = 0

        def flush(final: bool) -> None:
            nonlocal batch, written
            map_rows(layout, chunk, batch)
            chunk.clear()
            keep = [] if final or not batch.rows else [batch.rows.pop()]  # the next line may continue it
            if batch.rows:
                table = pa.Table.from_pylist(batch.rows, schema=TRANSACTION_ARROW_SCHEMA)
                ids = [transaction_row_id(sha, r["source_row"]) for r in batch.rows]
                writer.write_table(table.add_column(0, SPOOL_SCHEMA.field("row_id"), pa.array(ids, pa.string())))
                written += len(batch.rows)
            out.errors.extend(batch.errors)
            out.continuation_lines += batch.continuation_lines
            for k, v in batch.details.items():
                out.details[k] = out.details.get(k, 0) + v
            batch = TransactionFile(rows=keep)

        for rec in records:
            if isinstance(rec, ErrorRecord):
                source_errors.append(rec)
                continue
            chunk.append(rec)
            n_rows += 1
            if len(chunk) >= batch_rows:
                flush(final=False)
        flush(final=True)
    out.errors = sorted(out.errors + source_errors, key=lambda e: e.source_row or 0)
    out.n_records = n_rows + len(source_errors) - out.continuation_lines
    if out.continuation_lines:
        out.details["continuation_lines"] = out.continuation_lines
    return out, written
