"""What every structured statement reader (OFX, QIF, MT940, CAMT) returns, and its mapping to canonical rows.

A reader knows its format's fields exactly, so it skips the column guessing that delimited files need: it yields
`Entry` records that carry their own position in the file (`source_row`: a line number or a record index, as
`Statement.row_unit` says), and entries it cannot read as `(source_row, reason)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

from pipeline.ingest.tabular import NotATable
from pipeline.ingest.values import normalise_currency

_QUANT = Decimal("0.0001")


@dataclass(frozen=True)
class Entry:
    """One booked movement as the statement states it (amount negative = debit)."""

    source_row: int
    booked: date | datetime
    amount: Decimal
    currency: str | None = None
    account: str | None = None
    counterparty: str | None = None
    description: str | None = None


@dataclass
class Statement:
    """A parsed statement file: its entries, the entries that failed, and how it was read."""

    format: str
    row_unit: str  # what source_row counts in this file, e.g. "line" or "transaction record"
    entries: list[Entry] = field(default_factory=list)
    bad: list[tuple[int, str]] = field(default_factory=list)
    not_transactions: list[tuple[int, str]] = field(default_factory=list)  # records that book nothing of their own
    notes: list[str] = field(default_factory=list)

    @property
    def n_records(self) -> int:
        return len(self.entries) + len(self.bad) + len(self.not_transactions)


def as_utc(value: date | datetime) -> datetime:
    """Booking date or time as the canonical UTC timestamp (a date is its midnight)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)


def clean(text: Any) -> str | None:
    """Whitespace-normalised text, None when empty."""
    if text is None:
        return None
    s = " ".join(str(text).split())
    return s or None


def require_entries(statement: Statement) -> Statement:
    if not statement.entries and not statement.bad:
        raise NotATable(f"{statement.format} file without transactions")
    return statement


def canonical_rows(statement: Statement, source_file: str, fallback_currency: str | None,
                   fallback_account: str) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """(canonical rows, (source_row, reason) for entries that cannot become one)."""
    rows: list[dict[str, Any]] = []
    bad = list(statement.bad)
    for e in statement.entries:
        # none stated (QIF never states one): the row keeps the currency empty, never a guessed one
        currency = normalise_currency(e.currency) or fallback_currency
        rows.append({
            "account": e.account or fallback_account,
            "timestamp": as_utc(e.booked),
            "amount": Decimal(e.amount).quantize(_QUANT),
            "currency": currency,
            "counterparty": clean(e.counterparty),
            "description": clean(e.description),
            "source_file": source_file,
            "source_row": e.source_row,
        })
    return rows, bad
