"""Write canonical transactions as the messy logs users drop in: varied CSV dialects and JSONL.

Each writer returns the 1-based source row of every transaction it wrote (header lines
count, so row numbers match what a reader reports) so the expected canonical table of a
file can be reconstructed, and can plant deliberately bad rows.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from data.tools.fake import fmt_amount
from data.tools.transactions import Tx


@dataclass(frozen=True)
class LogLayout:
    """How one log file is written."""

    name: str
    delimiter: str
    encoding: str
    header: tuple[str, ...]
    date_format: str  # strftime
    amount_style: str  # fake.fmt_amount style
    split_debit_credit: bool = False


LAYOUTS = {
    "comma": LogLayout("comma", ",", "utf-8",
                       ("date", "account", "amount", "currency", "counterparty", "description"),
                       "%Y-%m-%dT%H:%M:%SZ", "plain"),
    "semicolon_de": LogLayout("semicolon_de", ";", "utf-8",
                              ("Buchungstag", "Auftragskonto", "Betrag", "Waehrung", "Empfaenger", "Verwendungszweck"),
                              "%d.%m.%Y", "de"),
    "latin1": LogLayout("latin1", ";", "latin-1",
                        ("Date", "IBAN", "Debit", "Credit", "Currency", "Payee", "Memo"),
                        "%d-%b-%Y", "plain", split_debit_credit=True),
}


def _csv_field(value: str, delimiter: str) -> str:
    if any(ch in value for ch in (delimiter, '"', "\n")):
        return '"' + value.replace('"', '""') + '"'
    return value


def write_csv(path: Path, txs: Sequence[Tx], layout: LogLayout,
              bad_rows: dict[int, str] | None = None) -> list[int]:
    """Write `txs`; `bad_rows` maps an index in txs to a broken amount text planted there."""
    bad_rows = bad_rows or {}
    lines = [layout.delimiter.join(layout.header)]
    rows = []
    for i, t in enumerate(txs):
        amount = fmt_amount(t.amount, layout.amount_style)
        if i in bad_rows:
            amount = bad_rows[i]
        if layout.split_debit_credit:
            neg = t.amount < 0
            mag = fmt_amount(abs(t.amount), layout.amount_style) if i not in bad_rows else bad_rows[i]
            money = [mag if neg else "", "" if neg else mag]
        else:
            money = [amount]
        cells = [t.timestamp.strftime(layout.date_format), t.account, *money, t.currency,
                 t.counterparty or "", t.description or ""]
        lines.append(layout.delimiter.join(_csv_field(c, layout.delimiter) for c in cells))
        rows.append(len(lines))
    path.write_bytes(("\r\n" if layout.name == "latin1" else "\n").join(lines).encode(layout.encoding) + b"\n")
    return rows


def write_jsonl(path: Path, txs: Sequence[Tx], bad_lines: dict[int, str] | None = None) -> list[int]:
    """JSONL with string amounts; `bad_lines` replaces a record by raw (invalid) text."""
    bad_lines = bad_lines or {}
    lines, rows = [], []
    for i, t in enumerate(txs):
        if i in bad_lines:
            lines.append(bad_lines[i])
        else:
            lines.append(json.dumps({
                "account": t.account, "date": t.timestamp.isoformat(),
                "amount": f"{t.amount.quantize(Decimal('0.01')):.2f}", "currency": t.currency,
                "counterparty": t.counterparty, "description": t.description,
            }, ensure_ascii=False))
        rows.append(len(lines))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows
