"""A delimited export whose column roles detection could not settle, put as a question for the model.

Detection reads what names and values decide (`columns`, `infer_columns`); what is left (which of Gross, Fee and
Net moves the account, which of two unnamed money columns is money in, what 'Belegdatum' and 'Buchungsbetrag'
mean) needs reading. The question carries the table's columns and first rows for the model, and how the file
was split (encoding, delimiter, header line) so that the answer can become a `BankProfile` the ordinary reader
applies — and the answer is checked against every value of the file before it is used (`pipeline.infer.layouts`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from pipeline.ingest.infer_columns import (
    balance_continuity,
    counter_or_id,
    is_currency_value,
    looks_like_header,
    net_of,
)
from pipeline.ingest.profiles import BankProfile
from pipeline.ingest.tabular import (
    _decode_best,
    _headerless_layout,
    _records,
)
from pipeline.ingest.values import (
    choose_date_format,
    parse_amount,
    parse_date,
    value_decimal_comma,
)

SHOWN_ROWS = 6  # rows the model reads
CHECKED_ROWS = 200  # rows the candidates are drawn from and the answer is checked against
NONE = "none"
DATE_ORDERS = ("day_first", "month_first", "year_first")
DECIMAL_MARKS = ("point", "comma")
FIELDS = ("date", "money", "currency", "counterparty", "description", "date_order", "decimal_mark")
_FILLED = 0.9  # share of rows a signed amount column, or a pair of one-sided columns, must fill
_NOT_MOVEMENT = re.compile(r"(?i)\b(price|rate|quantity|qty|tax|fee|fees|code|zip|units?|shares)\b|per unit")


@dataclass(frozen=True)
class LayoutQuestion:
    """What the model is shown and may answer, and how the file was split."""

    source_file: str
    reason: str  # why detection could not decide
    columns: tuple[str, ...]  # the header's names, or 'column 1', ... without a header row
    rows: tuple[tuple[str, ...], ...]  # the first CHECKED_ROWS data rows, cells as text
    header: bool
    skip_lines: int  # physical lines before the header (or the first record)
    delimiter: str | None  # None: a spreadsheet's or an HTML page's table
    encoding: str | None
    # field -> the answers the values allow: column labels ('date', 'currency', text roles), money readings
    # ('amount: Net', 'out: Debit / in: Credit'), date orders, decimal marks; one option is no question
    options: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def labels(self) -> list[str]:
        """One unique label per column: its name, or its name with its position where names repeat or are blank."""
        seen: dict[str, int] = {}
        for c in self.columns:
            seen[c] = seen.get(c, 0) + 1
        return [c if c and seen[c] == 1 else f"{c or 'column'} ({i + 1})" for i, c in enumerate(self.columns)]

    def choices(self) -> dict[str, tuple[str, ...]]:
        return dict(self.options)

    def asked(self) -> dict[str, tuple[str, ...]]:
        """The fields the values leave open (two options or more): what the model is asked."""
        return {f: o for f, o in self.options if len(o) > 1}


def _split_table(data: bytes) -> tuple[str, str, int, bool, list[str], list[list[str]]] | None:
    """(encoding, delimiter, header line, has header, column names, data rows) of a delimited file."""
    enc, text, cand = _decode_best(data)
    if cand is not None and cand.header_index is not None:
        delimiter, header_line = cand.delimiter, cand.header_index
        records, _ = _records(text, delimiter, header_line)
        header = True
    else:
        layout = _headerless_layout(text)
        if layout is None:
            return None
        delimiter, modal, _ = layout
        records, _ = _records(text, delimiter, 0)
        first = next((k for k, (_, rec) in enumerate(records) if len(rec) == modal), None)
        if first is None:
            return None
        records = records[first:]
        header = len(records) > 1 and looks_like_header(records[0][1])
        header_line = records[0][0] - 1
    if header:
        names, body = [c.strip() for c in records[0][1]], records[1:]
    else:
        width = max((len(r) for _, r in records[:50]), default=0)
        names, body = [f"column {i + 1}" for i in range(width)], records
    rows = [[c.strip() for c in rec] for _, rec in body[:CHECKED_ROWS]]
    return enc, delimiter, header_line, header, names, rows


def _values(rows: list[list[str]], i: int) -> list[str]:
    return [r[i] if i < len(r) else "" for r in rows]


def _is_amount(v: str) -> bool:
    try:
        return parse_amount(v, False)[0] is not None
    except ValueError:
        return False


def _date_orders(values: list[str]) -> set[str]:
    """The orders in which a column's dates read (two when every day is 12 or less)."""
    found = {_order(f) for f in (choose_date_format(values, prefer_month_first=m, min_share=0.9) for m in (False, True))
             if f is not None}
    return {o for o in found if o is not None}


def _identifiers(values: list[str]) -> bool:
    """Reference numbers, not names: single tokens with digits in them, nearly all different."""
    return (all(" " not in v and any(ch.isdigit() for ch in v) for v in values)
            and len(set(values)) >= 0.9 * len(values))


def _newest_first(values: list[str]) -> bool | None:
    """Whether a column's dates run newest first (None: not in one order, or not dates)."""
    filled = [v for v in values if v]
    fmt = choose_date_format(filled, min_share=0.9)
    if fmt is None:
        return None
    days = []
    for v in filled:
        try:
            days.append(parse_date(v, fmt))
        except ValueError:
            continue
    if all(a <= b for a, b in zip(days, days[1:])):
        return False if days[0] != days[-1] else None
    if all(a >= b for a, b in zip(days, days[1:])):
        return True
    return None


def _options(labels: list[str], rows: list[list[str]], header: bool) -> dict[str, tuple[str, ...]]:
    """What the values allow each field to be (see `LayoutQuestion.options`)."""
    n = len(rows)
    cols = [_values(rows, i) for i in range(len(labels))]
    dates, numeric, currency, text = [], [], [], []
    orders: set[str] = set()
    for i, values in enumerate(cols):
        filled = [v for v in values if v]
        if not filled:
            continue
        if len(filled) >= 0.5 * n and (found := _date_orders(filled)):
            dates.append(i)
            orders |= found
        elif sum(1 for v in filled if _is_amount(v)) >= 0.9 * len(filled):
            # a code or counter ('UNSPSC Code' 01234567, a line number) and a column named for a price, rate,
            # quantity, tax or fee hold numbers but never the money that moved: not offered as the amount
            if not counter_or_id(filled) and not (header and _NOT_MOVEMENT.search(labels[i])):
                numeric.append(i)
        elif sum(1 for v in filled if is_currency_value(v)) >= 0.8 * len(filled):
            currency.append(i)
        elif (sum(1 for v in filled if any(ch.isalpha() for ch in v)) >= 0.5 * len(filled)
              and not _identifiers(filled)):
            text.append(i)
    readings: dict[str, tuple[int, ...]] = {
        f"amount: {labels[i]}": (i,) for i in numeric if sum(1 for v in cols[i] if v) >= _FILLED * n}
    for a in numeric:
        for b in numeric:
            if a != b and any(cols[a]) and any(cols[b]) and sum(
                    1 for x, y in zip(cols[a], cols[b]) if bool(x) != bool(y)) >= _FILLED * n:
                readings[f"out: {labels[a]} / in: {labels[b]}"] = (a, b)
    # A running balance proves a reading (and which side of a split is money in); it is then no amount itself.
    # Without one, which of two one-sided columns is money in can only be read from their names: columns with
    # neither are never given a direction by guess.
    newest_first = _newest_first(cols[dates[0]]) if len(dates) == 1 else None
    signed = {r: (cols[c[0]] if len(c) == 1 else net_of(cols[c[0]], cols[c[1]])) for r, c in readings.items()}
    proven = [r for r, c in readings.items()
              if any(balance_continuity(signed[r], cols[k], newest_first) >= 0.8 for k in numeric if k not in c)]
    money = proven or [r for r, c in readings.items() if len(c) == 1 or header]
    marks = set()
    for i in numeric:
        for v in cols[i]:
            if v and (comma := value_decimal_comma(v, True)) == value_decimal_comma(v, False):
                marks.add("comma" if comma else "point")
    return {"date": tuple(labels[i] for i in dates), "money": tuple(money),
            "currency": (*(labels[i] for i in currency), NONE), "counterparty": (*(labels[i] for i in text), NONE),
            "description": (*(labels[i] for i in text), NONE),
            "date_order": tuple(o for o in DATE_ORDERS if o in orders),
            "decimal_mark": tuple(m for m in DECIMAL_MARKS if m in marks) if len(marks) == 1 else DECIMAL_MARKS}


def layout_question(data: bytes, source_file: str, reason: str) -> LayoutQuestion | None:
    """The question for a delimited file, or None when its values leave nothing to choose from (no column of
    dates, or no column or pair of columns of amounts)."""
    split = _split_table(data)
    if split is None:
        return None
    enc, delimiter, header_line, header, names, rows = split
    if not rows or len(names) < 2:
        return None
    q = LayoutQuestion(source_file=source_file, reason=reason, columns=tuple(names),
                       rows=tuple(tuple(r) for r in rows), header=header, skip_lines=header_line,
                       delimiter=delimiter, encoding=enc)
    options = _options(q.labels(), rows, header)
    if not options["date"] or not options["money"]:
        return None
    return replace(q, options=tuple(options.items()))


def grid_question(table: Any, source_file: str, reason: str) -> LayoutQuestion | None:
    """The question for a spreadsheet's (or HTML page's) table, from its header and typed cells."""
    rows = [["" if c is None else str(c).strip() for c in rec] for _, rec in table.rows[:CHECKED_ROWS]]
    names = [str(h).strip() for h in table.header]
    if not rows or len(names) < 2:
        return None
    q = LayoutQuestion(source_file=source_file, reason=reason, columns=tuple(names),
                       rows=tuple(tuple(r) for r in rows), header=True, skip_lines=0, delimiter=None, encoding=None)
    options = _options(q.labels(), rows, True)
    if not options["date"] or not options["money"]:
        return None
    return replace(q, options=tuple(options.items()))


def _column(question: LayoutQuestion, index: int) -> list[str]:
    return [r[index] if index < len(r) else "" for r in question.rows]


def _money_roles(reading: str, labels: list[str]) -> dict[str, int] | None:
    if reading.startswith("amount: ") and reading[8:] in labels:
        return {"amount": labels.index(reading[8:])}
    for label_out in labels:
        for label_in in labels:
            if reading == f"out: {label_out} / in: {label_in}":
                return {"debit": labels.index(label_out), "credit": labels.index(label_in)}
    return None


def answer_profile(question: LayoutQuestion, answer: dict[str, str]) -> BankProfile | str:
    """A profile from the model's answer (fields the values decided are taken as decided), or why the answer is
    refused: it must be one of the options the values allow, the dates must read in the order it gives, the
    amounts must parse with its decimal mark, and a column that moves by the amount is taken as the balance."""
    labels, options = question.labels(), question.choices()
    picked = {f: (opts[0] if len(opts) == 1 else answer.get(f)) for f, opts in options.items()}
    for f, value in picked.items():
        if value not in options[f]:
            return f"{f}: {value!r} is not among what the values allow ({', '.join(options[f])})"
    roles = _money_roles(picked["money"], labels) or {}
    roles["date"] = labels.index(picked["date"])
    for role in ("currency", "counterparty", "description"):
        if picked[role] != NONE and labels.index(picked[role]) not in roles.values():
            roles[role] = labels.index(picked[role])
    order, comma = picked["date_order"], picked["decimal_mark"] == "comma"
    dates = [v for v in _column(question, roles["date"]) if v]
    fmt = choose_date_format(dates, prefer_month_first=order == "month_first", min_share=0.9)
    if fmt is None or _order(fmt) != order:
        return f"the {picked['date']!r} column does not read as {order.replace('_', ' ')} dates"
    for role in ("amount", "debit", "credit"):
        if role in roles:
            values = [v for v in _column(question, roles[role]) if v]
            parsed = []
            for v in values:
                try:
                    parsed.append(parse_amount(v, comma)[0])
                except ValueError:
                    pass
            if len(parsed) < 0.9 * len(values):
                return f"the {labels[roles[role]]!r} column does not read as amounts with a decimal {picked['decimal_mark']}"
    if "amount" in roles:
        amounts = _column(question, roles["amount"])
        for i in range(len(labels)):
            if i not in roles.values() and len(question.rows) >= 3 and balance_continuity(amounts, _column(question, i)) >= 0.8:
                roles["balance"] = i
                break
    return BankProfile(name="model-mapped layout", filename=f"^{re.escape(question.source_file.rsplit('/', 1)[-1])}$",
                       source="the model's reading of the columns, among what the values allow",
                       encoding=question.encoding, delimiter=question.delimiter, skip_lines=question.skip_lines,
                       header=question.header, columns={r: i + 1 for r, i in roles.items()}, date_format=fmt,
                       decimal_comma=comma)


def _order(fmt: str) -> str | None:
    """day_first, month_first or year_first: which date part a format puts first (None: no day and month)."""
    found = sorted((fmt.find(code), name) for code, name in (("%d", "day_first"), ("%m", "month_first"),
                                                             ("%b", "month_first"), ("%B", "month_first"),
                                                             ("%Y", "year_first"), ("%y", "year_first"))
                   if code in fmt)
    return found[0][1] if found else None


def shown_table(question: LayoutQuestion) -> str:
    """The columns, the first rows and the open choices as the model reads them."""
    head = "\n".join(f"{i + 1}. {label}" for i, label in enumerate(question.labels()))
    rows = "\n".join(" | ".join(c[:60] for c in r) for r in question.rows[:SHOWN_ROWS])
    asked = "\n".join(f"{f}: {' | '.join(o)}" for f, o in question.asked().items())
    return f"Columns:\n{head}\n\nFirst rows (cells separated by ' | '):\n{rows}\n\nChoose:\n{asked}"
