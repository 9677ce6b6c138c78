"""Transaction logs (CSV/TSV/DAT/TXT, JSONL/JSON, Parquet, and the bank formats of `pipeline.ingest.formats`:
OFX/QFX, QIF, MT940, CAMT, spreadsheets) -> canonical Arrow transaction rows.

`read_transactions` never raises for bad input: rows it cannot understand become error rows that
carry the file and the 1-based line/record number; a file it cannot understand becomes one error.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import ErrorRecord, Stage, Unit
from pipeline.identity import stable_id
from pipeline.ingest import formats
from pipeline.ingest.columns import ColumnMatch, match_columns
from pipeline.ingest.formats.statement import Statement, canonical_rows
from pipeline.ingest.profiles import BankProfile, profile_for
from pipeline.ingest.tabular import NotATable, RawTable, parse_delimited
from pipeline.ingest.text_lines import physical_lines
from pipeline.ingest.values import (
    choose_date_format,
    detect_decimal_comma,
    iban_currency,
    normalise_currency,
    parse_amount,
    parse_date,
)
from schemas.transactions import TRANSACTION_ARROW_SCHEMA

DELIMITED_SUFFIXES = frozenset({".csv", ".tsv", ".txt", ".dat", ".tab"})
JSON_SUFFIXES = frozenset({".jsonl", ".ndjson", ".json"})
PARQUET_SUFFIXES = frozenset({".parquet", ".pq"})
TRANSACTION_SUFFIXES = DELIMITED_SUFFIXES | JSON_SUFFIXES | PARQUET_SUFFIXES | formats.SUFFIXES

# Transaction row ids carry it: bump it when a file reads differently (v2: decimal mark per value; v3: a broken
# record costs its own row only; v4: bank formats, totals lines, currency from the IBAN's country).
PARSER_VERSION = "tx-v4"


def transaction_row_id(file_sha256: str, source_row: int) -> str:
    """Id of one transaction: its file's content, its position there and the reader's version (a reader that
    parses the row differently makes a different row)."""
    return stable_id("tx", file_sha256, source_row, PARSER_VERSION)


def file_unit_id(file_sha256: str, source_file: str) -> str:
    """Id of a whole input file as a unit (for file-level errors)."""
    return stable_id("file", file_sha256, source_file)


@dataclass
class TransactionFile:
    """What one log produced: canonical rows, row errors, and how the file was read."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    n_records: int = 0  # data records read (counted by the reader, before mapping): rows + row errors


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Arrow table with the canonical `TRANSACTION_ARROW_SCHEMA`."""
    return pa.Table.from_pylist(rows, schema=TRANSACTION_ARROW_SCHEMA)


# ---------------------------------------------------------------- record-oriented inputs

def _records_table(records: list[tuple[int, dict[str, Any]]]) -> RawTable:
    keys: list[str] = []
    seen: set[str] = set()
    for _, rec in records:
        for k in rec:
            if k not in seen:
                seen.add(k)
                keys.append(k)
    rows = [(n, [rec.get(k) for k in keys]) for n, rec in records]
    return RawTable(header=keys, rows=rows, match=match_columns(keys))


def _json_records(data: bytes, source_file: str, sha: str, suffix: str) -> tuple[RawTable, list[ErrorRecord]]:
    text = data.decode("utf-8-sig", errors="replace")
    errors: list[ErrorRecord] = []
    records: list[tuple[int, dict[str, Any]]] = []
    stripped = text.lstrip()
    if suffix == ".json" and stripped.startswith(("[", "{")):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise NotATable(f"invalid JSON: {exc}") from exc
        except RecursionError as exc:
            raise NotATable("JSON nested too deeply to decode") from exc
        if isinstance(doc, dict):  # {"transactions": [...]} and similar wrappers
            lists = [v for v in doc.values() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)]
            if len(lists) != 1:
                raise NotATable("JSON object without exactly one list of transaction records")
            doc = lists[0]
        if not isinstance(doc, list):
            raise NotATable("JSON is not a list of records")
        for i, rec in enumerate(doc, start=1):
            if isinstance(rec, dict):
                records.append((i, rec))
            else:
                errors.append(_row_error(sha, source_file, i, "BadRecord", f"record {i} is not a JSON object"))
        return _records_table(records), errors
    # Records end at CR, LF or CRLF only (JSON forbids raw CR/LF inside strings; U+2028 and friends are legal there).
    for i, line in enumerate(physical_lines(text), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(_row_error(sha, source_file, i, "BadJSON", f"line {i}: {exc.msg}"))
            continue
        except RecursionError:
            errors.append(_row_error(sha, source_file, i, "BadJSON", f"line {i}: nested too deeply to decode"))
            continue
        if not isinstance(rec, dict):
            errors.append(_row_error(sha, source_file, i, "BadRecord", f"line {i} is not a JSON object"))
            continue
        records.append((i, rec))
    return _records_table(records), errors


def _parquet_records(data: bytes) -> RawTable:

    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:
        raise NotATable(f"unreadable Parquet: {type(exc).__name__}: {exc}") from exc
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    rows = [(r + 1, [c[r] for c in cols]) for r in range(table.num_rows)]
    return RawTable(header=table.column_names, rows=rows, match=match_columns(table.column_names))


# ---------------------------------------------------------------- mapping to canonical rows

# Exports often end with a totals line ("Transactions Total", "Summe", "Итого"); it stays an error row, named so.
_TOTAL_LABEL = re.compile(r"(?i)\b(total|totals|subtotal|summe|gesamt|totaal|totale|итого|всего)\b")


def _row_error(sha: str, source_file: str, line: int, cls: str, msg: str) -> ErrorRecord:
    return ErrorRecord(row_id=transaction_row_id(sha, line), unit=Unit.ROW, source_file=source_file,
                       source_row=line, stage=Stage.INGEST, error_class=cls, message=msg)


def _cell(rec: list[Any], idx: int | None) -> Any:
    if idx is None or idx >= len(rec):
        return None
    v = rec[idx]
    if isinstance(v, str):
        v = v.strip()
        if v.startswith("'") and len(v) > 1:  # spreadsheet text marker
            v = v[1:]
        return v or None
    return v


def _text_column(table: RawTable, idx: int | None) -> list[str]:
    return [str(c) for _, rec in table.rows if (c := _cell(rec, idx)) is not None and isinstance(c, str)]


def _pick_currency_column(table: RawTable) -> int | None:
    for idx in table.match.roles.get("currency", []):
        vals = _text_column(table, idx)
        if vals and sum(1 for v in vals if normalise_currency(v)) >= 0.8 * len(vals):
            return idx
    return None


def _date_columns(table: RawTable, prefer_month_first: bool) -> list[tuple[int, str | None]]:
    """Date-role columns that hold dates, priority order, each with its format (None: typed dates).

    The first is the booking date; later ones fill in where it is empty (pending card payments)."""
    out: list[tuple[int, str | None]] = []
    for idx in table.match.roles.get("date", []):
        typed = [c for _, rec in table.rows if isinstance(c := _cell(rec, idx), (date, datetime))]
        if typed:
            out.append((idx, None))
            continue
        vals = [str(c) for _, rec in table.rows if (c := _cell(rec, idx)) is not None]
        fmt = choose_date_format(vals, prefer_month_first, min_share=0.5) if vals else None
        if fmt:
            out.append((idx, fmt))
    return out


def _to_decimal(value: Any, decimal_comma: bool) -> tuple[Decimal | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, bool):
        raise ValueError(f"not an amount: {value!r}")
    if isinstance(value, (int, float, Decimal)):
        if isinstance(value, float) and value != value:
            return None, None
        return parse_amount(repr(value) if isinstance(value, float) else str(value), False)
    return parse_amount(str(value), decimal_comma)


def _to_timestamp(value: Any, fmt: str | None) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    if fmt is None:
        raise ValueError(f"no date format fits {value!r}")
    return parse_date(str(value), fmt)


def _amount_columns(match: ColumnMatch) -> list[int]:
    return [c for r in ("amount", "debit", "credit") for c in match.roles.get(r, [])[:1]]


def map_table(table: RawTable, source_file: str, sha: str, default_currency: str | None = None) -> TransactionFile:
    """Map a parsed table to canonical rows; each data row yields one row or one error."""
    out = TransactionFile()
    m = table.match
    amount_idx, debit_idx, credit_idx = m.first("amount"), m.first("debit"), m.first("credit")
    if amount_idx is None and debit_idx is None and credit_idx is None:
        raise NotATable(f"no amount column among {table.header[:12]}")
    cur_idx = _pick_currency_column(table)
    pre_account, pre_currency = table.preamble_hints()
    money_text = [v for idx in _amount_columns(m) for v in _text_column(table, idx)]
    cur_values = _text_column(table, cur_idx)
    dollar = any("$" in v for v in money_text)
    usd_share = sum(1 for v in cur_values if normalise_currency(v) == "USD") / max(1, len(cur_values))
    month_first = dollar or usd_share > 0.5 or m.header_currency == "USD" or pre_currency == "USD"
    profile = table.profile
    date_cols = ([(i, profile.date_format) for i in m.roles.get("date", [])] if profile and profile.date_format
                 else _date_columns(table, month_first))
    if not date_cols:
        raise NotATable("no column of recognisable dates" + (f" among {table.header[:12]}" if table.header else ""))
    decimal_comma = (profile.decimal_comma if profile and profile.decimal_comma is not None
                     else detect_decimal_comma(money_text, default=table.delimiter == ";"))
    account_idx, cp_idx = m.first("account"), m.first("counterparty")
    desc_cols = m.roles.get("description", [])
    fallback_account = pre_account or PurePosixPath(source_file).stem
    file_currency = (profile.currency if profile else None) or m.header_currency or pre_currency
    from_iban = 0
    out.details = {"encoding": table.encoding, "delimiter": table.delimiter, "headerless": table.headerless,
                   "date_format": date_cols[0][1], "decimal_comma": decimal_comma,
                   "columns": {r: [table.header[i] for i in v] for r, v in m.roles.items()}, "notes": table.notes}
    for line, rec in table.rows:
        try:
            if len(rec) <= max(i for i in (date_cols[0][0], amount_idx, debit_idx, credit_idx) if i is not None):
                raise ValueError(f"row has {len(rec)} fields, expected at least {len(table.header)}")
            dated = next(((v, f) for i, f in date_cols if (v := _cell(rec, i)) is not None), None)
            if dated is None:
                raise ValueError("empty date")
            ts = _to_timestamp(*dated)
            amount, cell_cur = _to_decimal(_cell(rec, amount_idx), decimal_comma)
            if amount is None and (debit_idx is not None or credit_idx is not None):
                debit, cur_d = _to_decimal(_cell(rec, debit_idx), decimal_comma)
                credit, cur_c = _to_decimal(_cell(rec, credit_idx), decimal_comma)
                if debit is not None or credit is not None:
                    amount = (abs(credit) if credit is not None else Decimal(0)) - (abs(debit) if debit is not None else Decimal(0))
                    amount = amount.quantize(Decimal("0.0001"))
                cell_cur = cell_cur or cur_d or cur_c
            if amount is None:
                raise ValueError("empty amount")
            currency = normalise_currency(_cell(rec, cur_idx)) if cur_idx is not None else None
            account = _cell(rec, account_idx)
            currency = currency or cell_cur or file_currency
            if currency is None and (currency := iban_currency(account if account is not None else fallback_account)):
                from_iban += 1
            currency = currency or default_currency
            if currency is None:
                raise ValueError("no currency: no currency column, symbol, file-level hint, IBAN country or "
                                 "--default-currency")
            descs = [str(v) for i in desc_cols if (v := _cell(rec, i)) is not None]
            cp = _cell(rec, cp_idx)
            out.rows.append({
                "account": str(account) if account is not None else fallback_account,
                "timestamp": ts,
                "amount": amount,
                "currency": currency,
                "counterparty": str(cp) if cp is not None else None,
                "description": " | ".join(dict.fromkeys(descs)) or None,
                "source_file": source_file,
                "source_row": int(line),
            })
        except ValueError as exc:
            if _TOTAL_LABEL.search(" ".join(str(c) for c in rec if isinstance(c, str))):
                out.errors.append(_row_error(sha, source_file, line, "SummaryRow",
                                             f"a totals line, not a transaction ({exc})"))
            else:
                out.errors.append(_row_error(sha, source_file, line, "BadRow", str(exc)))
    if from_iban:
        out.details["currency_from_iban_country"] = from_iban
    return out


def _bad_records(sha: str, source_file: str, bad: list[tuple[int, str]]) -> list[ErrorRecord]:
    return [_row_error(sha, source_file, line, "BadRecord", reason) for line, reason in bad]


def _statement_file(statement: Statement, source_file: str, sha: str, default_currency: str | None) -> TransactionFile:
    rows, bad = canonical_rows(statement, source_file, default_currency, PurePosixPath(source_file).stem)
    out = TransactionFile(rows=rows, n_records=statement.n_records)
    out.errors = _bad_records(sha, source_file, bad)
    out.details = {"format": statement.format, "source_row": statement.row_unit, "notes": statement.notes}
    return out


def _tables_file(tables: list[RawTable], source_file: str, sha: str, default_currency: str | None) -> TransactionFile:
    """Several tables of one file (a workbook's sheets), each mapped on its own, as one result."""
    out = TransactionFile()
    for table in tables:
        part = map_table(table, source_file, sha, default_currency)
        part.errors += _bad_records(sha, source_file, table.bad_records)
        out.rows += part.rows
        out.errors += part.errors
        out.n_records += len(table.rows) + len(table.bad_records)
        out.details.setdefault("sheets", []).append(part.details)
    return out


def read_transactions(data: bytes, source_file: str, sha: str, default_currency: str | None = None,
                      profiles: tuple[BankProfile, ...] = ()) -> TransactionFile:
    """Read one transaction log (a delimited one as the first matching bank profile says). File-level problems
    become a single file error."""
    suffix = PurePosixPath(source_file).suffix.lower()
    pre_errors: list[ErrorRecord] = []
    try:
        reader = formats.reader_for(suffix, data[:4096])
        if reader is not None:
            parsed = reader.read(data)
            result = (_statement_file(parsed, source_file, sha, default_currency) if isinstance(parsed, Statement)
                      else _tables_file(parsed, source_file, sha, default_currency))
            result.errors.sort(key=lambda e: e.source_row or 0)
            return result
        if suffix in PARQUET_SUFFIXES:
            table = _parquet_records(data)
        elif suffix in JSON_SUFFIXES:
            table, pre_errors = _json_records(data, source_file, sha, suffix)
        else:
            table = parse_delimited(data, profile_for(source_file, profiles))
        if not table.rows and not pre_errors:
            raise NotATable("no data rows")
        result = map_table(table, source_file, sha, default_currency)
    except NotATable as exc:
        cls = "EmptyTable" if str(exc) == "no data rows" else "UnrecognisedTable"
        err = ErrorRecord(row_id=file_unit_id(sha, source_file), unit=Unit.FILE, source_file=source_file,
                          stage=Stage.INGEST, error_class=cls, message=f"not a transaction log we can read: {exc}",
                          n_rows=0)
        return TransactionFile(errors=[err])
    bad = _bad_records(sha, source_file, table.bad_records)
    result.errors = sorted(pre_errors + bad + result.errors, key=lambda e: e.source_row or 0)
    result.n_records = len(table.rows) + len(table.bad_records) + len(pre_errors)
    return result
