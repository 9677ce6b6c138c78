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
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import ErrorRecord, Stage, Unit
from pipeline.identity import stable_id
from pipeline.ingest import formats
from pipeline.ingest.columns import (
    BALANCE_LINE,
    SUMMARY_LABEL,
    TOTAL_LABEL,
    ColumnMatch,
    match_columns,
    normalise_header,
    synonym_role,
)
from pipeline.ingest.formats import text_statement
from pipeline.ingest.formats.statement import Statement, canonical_rows, require_entries
from pipeline.ingest.infer_columns import (
    complete_roles,
    direction_marks,
    filled_cells,
    flag_marks,
)
from pipeline.ingest.layout_question import (
    LayoutQuestion,
    grid_question,
    layout_question,
)
from pipeline.ingest.profiles import BankProfile, profile_for
from pipeline.ingest.tabular import (
    NotATable,
    ProfileMismatch,
    RawTable,
    looks_delimited,
    not_transactions,
    parse_delimited,
    profile_columns,
)
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
_PARQUET_MAGIC = b"PAR1"


def content_suffix(head: bytes) -> str | None:
    """The suffix a transaction log's first bytes show, whatever its name says ('.csv' for a delimited export
    saved as '.pdf' or without an extension), or None when they show no transaction log."""
    if formats.reader_for("", head[:4096]) is not None:
        return ".statement"
    if head.startswith(_PARQUET_MAGIC):
        return ".parquet"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] in (b"[", b"{"):
        if _parses(text) or (text[:1] == b"[" and re.match(rb"\[\s*\{", text) and len(head) >= _HEAD_BYTES):
            return ".json"  # one document (a long one is cut in the head: it must open a list of objects)
        first = text.split(b"\n", 1)[0]
        return ".jsonl" if text[:1] == b"{" and _parses(first) else None
    return ".csv" if looks_delimited(head) else None


_HEAD_BYTES = 64 * 1024


def _parses(data: bytes) -> bool:
    try:
        json.loads(data.decode("utf-8"))
        return True
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return False

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
    continuation_lines: int = 0  # lines that only continue the description above (part of that record)
    question: LayoutQuestion | None = None  # a layout detection could not settle, for the model to read


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Arrow table with the canonical `TRANSACTION_ARROW_SCHEMA`."""
    return pa.Table.from_pylist(rows, schema=TRANSACTION_ARROW_SCHEMA)


# ---------------------------------------------------------------- record-oriented inputs

def records_table(records: list[tuple[int, dict[str, Any]]]) -> RawTable:
    """Flattened records as a table: their names in first-seen order, each record's values by name."""
    keys: list[str] = []
    seen: set[str] = set()
    for _, rec in records:
        for k in rec:
            if k not in seen:
                seen.add(k)
                keys.append(k)
    rows = [(n, [rec.get(k) for k in keys]) for n, rec in records]
    return RawTable(header=keys, rows=rows, match=match_columns([_field_name(k) for k in keys]))


def _field_name(dotted: str) -> str:
    """The name a nested field is matched by: its own ('transaction.bookingDate' -> 'bookingDate'), or its
    parent's where its own says only that it is a value: 'amount.value' is the amount, 'gross.value' no amount."""
    parts = dotted.split(".")
    if len(parts) < 2 or normalise_header(parts[-1]) != "value":
        return parts[-1]
    return parts[-2] if synonym_role(parts[-2]) else " ".join(parts[-2:])


def _flatten(obj: dict[str, Any], prefix: str = "") -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """(scalar fields under dotted names, lists of objects by dotted name) of one JSON object; a list of scalars
    is one field, its items joined."""
    scalars: dict[str, Any] = {}
    lists: dict[str, list[Any]] = {}
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            sub_scalars, sub_lists = _flatten(v, key + ".")
            scalars.update(sub_scalars)
            lists.update(sub_lists)
        elif isinstance(v, list):
            if v and all(isinstance(x, dict) for x in v):
                lists[key] = v
            else:
                scalars[key] = " | ".join(str(x) for x in v if x is not None) or None
        else:
            scalars[key] = v
    return scalars, lists


_INHERITED_ROLES = ("account", "currency")  # what a record takes from the objects it is nested in


def _record_sets(doc: Any) -> dict[str, list[Any]]:
    """Every list of objects in a JSON document by its path pattern ('accounts[].activity[]'), each item
    flattened and carrying the account and currency fields of the objects it sits in; items that are not
    objects are kept as they are (each becomes a row error)."""
    out: dict[str, list[Any]] = {}

    def inherited(scalars: dict[str, Any]) -> dict[str, Any]:
        names = list(scalars)
        match = match_columns([k.rsplit(".", 1)[-1] for k in names])
        return {names[i]: scalars[names[i]] for r in _INHERITED_ROLES for i in match.roles.get(r, [])[:1]}

    def walk(items: list[Any], pattern: str, context: dict[str, Any]) -> None:
        for item in items:
            if not isinstance(item, dict):
                out.setdefault(pattern, []).append(item)
                continue
            scalars, lists = _flatten(item)
            out.setdefault(pattern, []).append({**context, **scalars})
            for key, sub in lists.items():
                walk(sub, f"{pattern}.{key}[]", {**context, **inherited(scalars)})

    if isinstance(doc, list):
        walk(doc, "[]", {})
    elif isinstance(doc, dict):
        scalars, lists = _flatten(doc)
        for key, sub in lists.items():
            walk(sub, f"{key}[]", inherited(scalars))
    return out


_CORE_SCORE = 10  # ColumnMatch.score of a date plus an amount


def _one_record(doc: dict[str, Any]) -> RawTable | None:
    """The document as one transaction (a payment's detail page, its lists being parts of it: funding sources,
    taxes) when its own fields hold a date and an amount, else None. A list's amounts carry their signs; one
    record's unsigned amount (a receipt's total) says which way it moved only through a credit/debit flag, so
    without one it is an error, never a guessed sign."""
    table = records_table([(1, _flatten(doc)[0])])
    roles = complete_roles(table.match, table.rows, len(table.header))
    if roles.score < _CORE_SCORE:
        return None
    money = roles.first("amount") if roles.first("amount") is not None else roles.first("debit")
    signed = money is not None and str(table.rows[0][1][money]).lstrip().startswith(("-", "("))
    if roles.first("direction") is None and not signed and roles.first("credit") is None:
        raise NotATable("the document is one record whose amount has no sign and no credit/debit flag: "
                        "which way the money moved is not stated")
    table.notes.append("the document is one transaction record")
    return table


def _json_document(doc: Any, source_file: str, sha: str) -> tuple[RawTable, list[ErrorRecord]]:
    """The records of a JSON export, found by shape: of all lists of objects (however deeply nested: PayPal's
    `transaction_details[].transaction_info`, a brokerage's `accounts[].activity[]`), the one whose fields read
    best as transactions (a date and an amount, by name or by value), its fields named by their dotted path."""
    sets = _record_sets(doc)
    scored = []
    for pattern, items in sets.items():
        records = [(i, rec) for i, rec in enumerate(items, start=1) if isinstance(rec, dict)]
        table = records_table(records)
        match = complete_roles(table.match, table.rows, len(table.header))
        scored.append(((match.score, len(records)), pattern, items, table))
    if (isinstance(doc, dict) and max((t[0][0] for t in scored), default=0) < _CORE_SCORE
            and (one := _one_record(doc)) is not None):
        return one, []
    if not sets:
        raise NotATable("JSON without a list of records")
    _, pattern, items, table = max(scored, key=lambda t: t[0])
    errors = [_row_error(sha, source_file, i, "BadRecord", f"record {i} is not a JSON object")
              for i, rec in enumerate(items, start=1) if not isinstance(rec, dict)]
    if len(sets) > 1:
        table.notes.append(f"records: {pattern} (other lists: {', '.join(p for p in sets if p != pattern)})")
    return table, errors


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
        return _json_document(doc, source_file, sha)
    # Records end at CR, LF or CRLF only (JSON forbids raw CR/LF inside strings; U+2028 and friends are legal there).
    for i, line in enumerate(physical_lines(text), start=1):
        rec = jsonl_record(line, i, source_file, sha)
        if isinstance(rec, ErrorRecord):
            errors.append(rec)
        elif rec is not None:
            records.append((i, rec))
    return records_table(records), errors


def jsonl_record(line: str, i: int, source_file: str, sha: str) -> dict[str, Any] | ErrorRecord | None:
    """Line `i` of a JSON Lines log: its record's fields under dotted names, the line's row error, or None for
    a blank line."""
    if not line.strip():
        return None
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        return _row_error(sha, source_file, i, "BadJSON", f"line {i}: {exc.msg}")
    except RecursionError:
        return _row_error(sha, source_file, i, "BadJSON", f"line {i}: nested too deeply to decode")
    if not isinstance(rec, dict):
        return _row_error(sha, source_file, i, "BadRecord", f"line {i} is not a JSON object")
    return _flatten(rec)[0]


def _parquet_records(data: bytes) -> RawTable:

    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:
        raise NotATable(f"unreadable Parquet: {type(exc).__name__}: {exc}") from exc
    match = match_columns(table.column_names)
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    notes = []
    for i, name in enumerate(table.column_names):
        named_time = i in match.roles.get("date", []) or normalise_header(name).split(" ")[-1] in _TIME_WORDS
        if named_time and pa.types.is_integer(table.schema.field(i).type):
            cols[i], unit = _epoch_dates(cols[i])
            if unit:
                notes.append(f"{name}: integer times read as Unix epoch {unit}")
    rows = [(r + 1, [c[r] for c in cols]) for r in range(table.num_rows)]
    return RawTable(header=table.column_names, rows=rows, match=match, notes=notes)


_TIME_WORDS = frozenset({"date", "time", "timestamp", "datetime", "ts", "epoch"})
# Unix epoch units by the size of a present-day value: seconds ~1.7e9, milliseconds ~1.7e12, micro ~1.7e15, nano ~1.7e18
_EPOCH_UNITS = ((1e11, 1, "seconds"), (1e14, 1e3, "milliseconds"), (1e17, 1e6, "microseconds"),
                (float("inf"), 1e9, "nanoseconds"))


def _epoch_dates(values: list[Any]) -> tuple[list[Any], str | None]:
    """Integer times of a date column as UTC datetimes, the unit read from their size (one unit for the column);
    values unchanged (and no unit) when they are no plausible times (1900-2100)."""
    present = [abs(v) for v in values if v is not None]
    if not present:
        return values, None
    divisor, unit = next((d, u) for limit, d, u in _EPOCH_UNITS if max(present) < limit)
    try:
        out = [None if v is None else datetime.fromtimestamp(v / divisor, tz=timezone.utc) for v in values]
    except (OverflowError, OSError, ValueError):
        return values, None
    if not all(1900 <= d.year <= 2100 for d in out if d is not None):
        return values, None
    return out, unit


# ---------------------------------------------------------------- mapping to canonical rows

# Exports often end with a totals line ("Transactions Total", "Summe", "Итого"); it stays an error row, named so.


NO_DATA_ROWS = "no data rows"


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
        # a note spread over the first column (a disclaimer under the table) is no record: its cell is no date
        vals = [str(c) for _, rec in table.rows if (c := _cell(rec, idx)) is not None and filled_cells(rec) >= 2]
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
    if not any(ch.isdigit() for ch in str(value)):  # 'Pending', 'Vorgemerkt': a card payment not booked yet
        raise ValueError(f"no booking date yet ({str(value)!r})")
    return parse_date(str(value), fmt)


def _amount_columns(match: ColumnMatch) -> list[int]:
    return [c for r in ("amount", "debit", "credit") for c in match.roles.get(r, [])[:1]]


def _continuation(rec: list[Any], key_cols: list[int], desc_cols: list[int]) -> bool:
    """A line that only continues the text of the transaction above it: its date and money cells are empty and
    its text sits in a description column."""
    return (all(_cell(rec, i) is None for i in key_cols)
            and any(_cell(rec, i) is not None for i in desc_cols)
            and filled_cells(rec) <= 2)


def _holds_date_or_amount(rec: list[Any], date_cols: list[tuple[int, str | None]], money_cols: list[int],
                          decimal_comma: bool) -> bool:
    """Whether any date cell of a row parses as a date or any money cell as an amount."""
    for i, fmt in date_cols:
        v = _cell(rec, i)
        if v is not None:
            try:
                _to_timestamp(v, fmt)
                return True
            except ValueError:
                pass
    for i in money_cols:
        try:
            if _to_decimal(_cell(rec, i), decimal_comma)[0] is not None:
                return True
        except ValueError:
            pass
    return False


@dataclass
class Layout:
    """How a table's rows become transactions, decided once from its rows (or, for a stream, from its head) and
    then applied to every row."""

    source_file: str
    sha: str
    width: int
    date_cols: list[tuple[int, str | None]]
    amount_idx: int | None
    debit_idx: int | None
    credit_idx: int | None
    cur_idx: int | None
    account_idx: int | None
    cp_idx: int | None
    desc_cols: list[int]
    dir_idx: int | None
    marks: tuple[frozenset[str], frozenset[str]] | None
    decimal_comma: bool
    fallback_account: str
    file_currency: str | None
    default_currency: str | None
    details: dict[str, Any]
    other_money: list[int] = field(default_factory=list)  # money-named columns the layout does not read

    @property
    def money_cols(self) -> list[int]:
        return [i for i in (self.amount_idx, self.debit_idx, self.credit_idx) if i is not None]


def table_layout(table: RawTable, source_file: str, sha: str, default_currency: str | None = None) -> Layout:
    """The layout of a parsed table (its roles completed from the cells where the header leaves them open).
    Raises NotATable with the reason when no layout fits."""
    m = table.match
    if (m.by_word or m.first("date") is None or m.first("currency") is None or not _amount_columns(m)
            or not (m.roles.get("description") or m.roles.get("counterparty"))):
        m = table.match = complete_roles(m, table.rows, len(table.header))
    amount_idx, debit_idx, credit_idx = m.first("amount"), m.first("debit"), m.first("credit")
    if amount_idx is None and debit_idx is None and credit_idx is None:
        if m.undecided.get("amount"):
            names = ", ".join(repr(table.header[i]) for i in m.undecided["amount"])
            raise NotATable(f"several columns could be the amount ({names}) and neither the header nor a running "
                            "balance tells which: name it in a bank profile (--bank-profiles)")
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
    # an unsigned amount column beside debit/credit marks ('14.34', 'D') takes its sign from the mark
    dir_idx = m.first("direction") if amount_idx is not None else None
    dir_values = [str(c) for _, rec in table.rows if (c := _cell(rec, dir_idx)) is not None]  # JSON's true/false too
    marks = (direction_marks(dir_values) or flag_marks(normalise_header(table.header[dir_idx]), dir_values)
             if dir_idx is not None else None)
    if marks and any(str(v).lstrip().startswith("-") for v in _text_column(table, amount_idx)):
        marks = None  # the amounts carry their own sign
    used = {amount_idx, debit_idx, credit_idx}
    other_money = [i for r in ("amount", "debit", "credit") for i in m.roles.get(r, []) if i not in used]
    details = {"layout_source": "profile" if profile else "detected",
               "encoding": table.encoding, "delimiter": table.delimiter, "headerless": table.headerless,
               "date_format": date_cols[0][1], "decimal_comma": decimal_comma,
               "columns": {r: [table.header[i] for i in v] for r, v in m.roles.items()},
               "notes": [*table.notes, *m.notes]}
    return Layout(source_file=source_file, sha=sha, width=len(table.header), date_cols=date_cols,
                  amount_idx=amount_idx, debit_idx=debit_idx, credit_idx=credit_idx, cur_idx=cur_idx,
                  account_idx=m.first("account"), cp_idx=m.first("counterparty"),
                  desc_cols=m.roles.get("description", []), dir_idx=dir_idx, marks=marks, decimal_comma=decimal_comma,
                  fallback_account=pre_account or PurePosixPath(source_file).stem,
                  file_currency=(profile.currency if profile else None) or m.header_currency or pre_currency,
                  default_currency=default_currency, details=details, other_money=other_money)


class _NoMoney(ValueError):
    """A dated row whose every amount column is empty."""


def map_rows(layout: Layout, rows: list[tuple[int, list[Any]]], out: TransactionFile) -> None:
    """Each row into `out`: one transaction, one row error, or (a wrapped description line) part of the row
    above."""
    lo = layout
    source_file, sha, money_cols = lo.source_file, lo.sha, lo.money_cols
    key_cols = [i for i, _ in lo.date_cols] + money_cols
    needed = max(i for i in (lo.date_cols[0][0], lo.amount_idx, lo.debit_idx, lo.credit_idx) if i is not None)
    from_iban = unstated = 0
    for line, rec in rows:
        if out.rows and _continuation(rec, key_cols, lo.desc_cols):
            # a wrapped description (",,UBER EATS ..." under its transaction) belongs to the row above
            extra = " ".join(str(c).strip() for c in rec if c is not None and str(c).strip())
            out.rows[-1]["description"] = " | ".join(x for x in (out.rows[-1]["description"], extra) if x)
            out.continuation_lines += 1
            continue
        try:
            if len(rec) <= needed:
                raise ValueError(f"row has {len(rec)} fields, expected at least {lo.width}")
            dated = next(((v, f) for i, f in lo.date_cols if (v := _cell(rec, i)) is not None), None)
            if dated is None:
                raise ValueError("empty date")
            ts = _to_timestamp(*dated)
            amount, cell_cur = _to_decimal(_cell(rec, lo.amount_idx), lo.decimal_comma)
            if amount is None and (lo.debit_idx is not None or lo.credit_idx is not None):
                debit, cur_d = _to_decimal(_cell(rec, lo.debit_idx), lo.decimal_comma)
                credit, cur_c = _to_decimal(_cell(rec, lo.credit_idx), lo.decimal_comma)
                if debit is not None or credit is not None:
                    amount = (abs(credit) if credit is not None else Decimal(0)) - (abs(debit) if debit is not None else Decimal(0))
                    amount = amount.quantize(Decimal("0.0001"))
                cell_cur = cell_cur or cur_d or cur_c
            if amount is None:  # no money moved, unless a money column the layout does not read holds some
                raise (ValueError if any(_cell(rec, i) is not None for i in lo.other_money) else _NoMoney)(
                    "empty amount")
            if lo.marks is not None:
                mark = "" if (flag := _cell(rec, lo.dir_idx)) is None else str(flag).strip().upper()
                if mark not in lo.marks[0] | lo.marks[1]:
                    raise ValueError(f"no debit/credit mark for an unsigned amount ({mark!r})")
                amount = -abs(amount) if mark in lo.marks[0] else abs(amount)
            currency = normalise_currency(_cell(rec, lo.cur_idx)) if lo.cur_idx is not None else None
            account = _cell(rec, lo.account_idx)
            currency = currency or cell_cur or lo.file_currency
            if currency is None and (currency := iban_currency(account if account is not None else lo.fallback_account)):
                from_iban += 1
            currency = currency or lo.default_currency
            if currency is None and lo.cur_idx is not None:  # the row leaves out what its file states per row
                raise ValueError("no currency: the currency column is empty and no symbol, file-level hint, IBAN "
                                 "country or --default-currency gives one")
            # An export that states no currency at all keeps its rows with the currency empty (never a guessed
            # one); the file's details count them, and --default-currency fills them.
            unstated += currency is None
            descs = [str(v) for i in lo.desc_cols if (v := _cell(rec, i)) is not None]
            cp = _cell(rec, lo.cp_idx)
            if descs and cp is None and SUMMARY_LABEL.match(label := " ".join(descs)):
                out.errors.append(_row_error(sha, source_file, line, "SummaryRow",
                                             f"line {line} is labelled {label!r} only: a balance or totals line, not "
                                             "a transaction"))
                continue
            out.rows.append({
                "account": str(account) if account is not None else lo.fallback_account,
                "timestamp": ts,
                "amount": amount,
                "currency": currency,
                "counterparty": str(cp) if cp is not None else None,
                "description": " | ".join(dict.fromkeys(descs)) or None,
                "source_file": source_file,
                "source_row": int(line),
            })
        except ValueError as exc:
            if TOTAL_LABEL.search(words := " ".join(str(c) for c in rec if isinstance(c, str))):
                out.errors.append(_row_error(sha, source_file, line, "SummaryRow",
                                             f"a totals line, not a transaction ({exc})"))
            elif BALANCE_LINE.search(words):
                out.errors.append(_row_error(sha, source_file, line, "SummaryRow",
                                             f"an opening or closing balance, not a transaction ({exc})"))
            elif isinstance(exc, _NoMoney):
                out.errors.append(_row_error(sha, source_file, line, "NotATransaction",
                                             f"line {line} moves no money: every amount column is empty (an entry "
                                             "in units only, such as a stock split or a fund conversion)"))
            elif not _holds_date_or_amount(rec, lo.date_cols, money_cols, lo.decimal_comma):
                out.errors.append(_row_error(sha, source_file, line, "NotATransaction",
                                             f"line {line} holds no date and no amount: a note or footer, not a "
                                             f"transaction ({exc})"))
            else:
                out.errors.append(_row_error(sha, source_file, line, "BadRow", str(exc)))
    for key, n in (("currency_from_iban_country", from_iban), ("currency_unstated_rows", unstated)):
        if n:
            out.details[key] = out.details.get(key, 0) + n


def map_table(table: RawTable, source_file: str, sha: str, default_currency: str | None = None) -> TransactionFile:
    """Map a parsed table to canonical rows; each data row yields one row or one error."""
    layout = table_layout(table, source_file, sha, default_currency)
    out = TransactionFile(details=dict(layout.details))
    map_rows(layout, table.rows, out)
    return out


def bad_record_errors(sha: str, source_file: str, bad: list[tuple[int, str]]) -> list[ErrorRecord]:
    return [_row_error(sha, source_file, line, "BadRecord", reason) for line, reason in bad]


def _statement_file(statement: Statement, source_file: str, sha: str, default_currency: str | None) -> TransactionFile:
    rows, bad = canonical_rows(statement, source_file, default_currency, PurePosixPath(source_file).stem)
    out = TransactionFile(rows=rows, n_records=statement.n_records)
    out.errors = sorted(bad_record_errors(sha, source_file, bad) + [
        _row_error(sha, source_file, row, "NotATransaction", reason) for row, reason in statement.not_transactions],
        key=lambda e: e.source_row or 0)
    out.details = {"format": statement.format, "source_row": statement.row_unit, "notes": statement.notes}
    if unstated := sum(r["currency"] is None for r in rows):
        out.details["currency_unstated_rows"] = unstated
    return out


class UnsettledTable(NotATable):
    """A spreadsheet table detection could not map, carried for the model's question."""

    def __init__(self, message: str, table: RawTable) -> None:
        super().__init__(message)
        self.table = table


def _tables_file(tables: list[RawTable], source_file: str, sha: str, default_currency: str | None,
                 profile: BankProfile | None = None) -> TransactionFile:
    """Several tables of one file (a workbook's sheets, a page's HTML tables), each mapped on its own (with the
    columns a bank profile names, where one matches the file), as one result."""
    out = TransactionFile()
    for table in tables:
        profiled = False
        if profile is not None:
            try:
                table.match, table.profile = profile_columns(profile, table.header, table.match), profile
                table.notes.append(f"bank profile {profile.name!r}")
                profiled = True
            except ProfileMismatch as exc:
                if not profile.shipped:
                    raise
                table.notes.append(f"{exc}; layout detected instead")
        try:
            part = map_table(table, source_file, sha, default_currency)
        except NotATable as exc:
            raise (exc if profiled else UnsettledTable(str(exc), table)) from None
        part.errors += bad_record_errors(sha, source_file, table.bad_records)
        out.rows += part.rows
        out.errors += part.errors
        out.n_records += len(table.rows) + len(table.bad_records) - part.continuation_lines
        out.details.setdefault("sheets", []).append(part.details)
    return out


def unreadable_log(exc: NotATable, data: bytes, source_file: str, sha: str, ask: bool) -> TransactionFile:
    """The file-level error of a log no layout fits, with the layout question for the model where detection
    left one open (`ask`: a delimited log no bank profile names; the error stands unless the answer holds)."""
    cls = "EmptyTable" if str(exc) == NO_DATA_ROWS else "UnrecognisedTable"
    err = ErrorRecord(row_id=file_unit_id(sha, source_file), unit=Unit.FILE, source_file=source_file,
                      stage=Stage.INGEST, error_class=cls, message=f"not a transaction log we can read: {exc}",
                      n_rows=0)
    question = (grid_question(exc.table, source_file, str(exc)) if isinstance(exc, UnsettledTable)
                else layout_question(data, source_file, str(exc)) if ask and cls == "UnrecognisedTable" else None)
    return TransactionFile(errors=[err], question=question)


@dataclass(frozen=True)
class LogFormat:
    """How a transaction log is read, decided once from its name and first bytes (`log_format`)."""

    name: str  # a bank format's reader (ofx, camt, mt940, qif, excel, html_table), parquet, json, jsonl, delimited
    reader: ModuleType | None  # the bank format's reader module
    suffix: str  # the suffix its content shows (what the name says where the content does not say otherwise)


def log_format(source_file: str, head: bytes) -> LogFormat:
    """Content decides where the name is no log's or the bytes show another format (a CSV saved as `.pdf`, an
    `.xls` that is a CSV, a Parquet file without its suffix); otherwise the name does."""
    suffix = PurePosixPath(source_file).suffix.lower()
    if suffix not in TRANSACTION_SUFFIXES or head.startswith(_PARQUET_MAGIC):
        suffix = content_suffix(head[:_HEAD_BYTES]) or suffix
    reader = formats.reader_for(suffix, head[:4096])
    if reader is not None and not reader.sniff(head[:4096]) and (seen := content_suffix(head[:_HEAD_BYTES])):
        reader, suffix = None, seen  # an '.xls' that is a CSV: what the bytes show wins over the name
    if reader is not None:
        return LogFormat(reader.__name__.rsplit(".", 1)[-1], reader, suffix)
    if suffix in PARQUET_SUFFIXES:
        return LogFormat("parquet", None, suffix)
    if suffix in JSON_SUFFIXES:
        return LogFormat("json" if suffix == ".json" else "jsonl", None, suffix)
    return LogFormat("delimited", None, suffix)


def is_streamable(source_file: str, head: bytes) -> bool:
    """Whether a log is a delimited text export or JSON Lines (not a bank format, Parquet or one JSON document):
    the kinds read in batches when large (`pipeline.ingest.stream_log`)."""
    fmt = log_format(source_file, head)
    return fmt.name == "jsonl" or (fmt.name == "delimited" and fmt.suffix in DELIMITED_SUFFIXES)


def read_transactions(data: bytes, source_file: str, sha: str, default_currency: str | None = None,
                      profiles: tuple[BankProfile, ...] = ()) -> TransactionFile:
    """Read one transaction log (a delimited one as the first matching bank profile says). File-level problems
    become a single file error."""
    delimited_unprofiled = False
    pre_errors: list[ErrorRecord] = []
    fmt = log_format(source_file, data[:_HEAD_BYTES])
    try:
        if fmt.reader is not None:
            parsed = fmt.reader.read(data)
            result = (_statement_file(parsed, source_file, sha, default_currency) if isinstance(parsed, Statement)
                      else _tables_file(parsed, source_file, sha, default_currency,
                                        profile_for(source_file, profiles)))
            result.errors.sort(key=lambda e: e.source_row or 0)
            return result
        if fmt.name == "parquet":
            table = _parquet_records(data)
        elif fmt.name in ("json", "jsonl"):
            table, pre_errors = _json_records(data, source_file, sha, fmt.suffix)
        else:
            profile = profile_for(source_file, profiles)
            delimited_unprofiled = profile is None
            table = parse_delimited(data, profile)
        if not table.rows and not pre_errors:
            raise NotATable(NO_DATA_ROWS)
        result = map_table(table, source_file, sha, default_currency)
    except NotATable as exc:
        if delimited_unprofiled and str(exc) != NO_DATA_ROWS and (held := not_transactions(data)):
            return TransactionFile(errors=[ErrorRecord(
                row_id=file_unit_id(sha, source_file), unit=Unit.FILE, source_file=source_file, stage=Stage.INGEST,
                error_class="NotTransactions", n_rows=0, message=f"not a transaction log: {held}, no money moving")])
        if delimited_unprofiled and str(exc) != NO_DATA_ROWS:
            try:  # text that no delimited layout fits may be a statement laid out in columns
                return _statement_file(require_entries(text_statement.read(data)), source_file, sha,
                                       default_currency)
            except NotATable as not_text:
                exc = NotATable(f"{exc}; nor a laid-out text statement: {not_text}")
        return unreadable_log(exc, data, source_file, sha, ask=delimited_unprofiled)
    bad = bad_record_errors(sha, source_file, table.bad_records)
    result.errors = sorted(pre_errors + bad + result.errors, key=lambda e: e.source_row or 0)
    result.n_records = len(table.rows) + len(table.bad_records) + len(pre_errors) - result.continuation_lines
    if result.continuation_lines:
        result.details["continuation_lines"] = result.continuation_lines
    return result
