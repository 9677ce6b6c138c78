"""Column roles read from what the cells hold, for tables whose header names are unknown or absent.

The header's names (synonyms, `columns.match_columns`) decide where they can; this module fills in the roles they
leave open from the values: the date column is the one whose cells parse as dates; the currency column the one
whose cells are ISO 4217 codes; the amount column a numeric column with cents. Where several numeric columns
qualify (amount, balance, fee, exchange rate), a running balance gives itself away: its steps equal the amount
column's values, so the pair is told apart by continuity instead of by a guess.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from pipeline.grounding.amounts import iso_currencies
from pipeline.ingest.columns import ColumnMatch
from pipeline.ingest.values import (
    CURRENCY_SYMBOLS,
    choose_date_format,
    detect_decimal_comma,
    normalise_currency,
    parse_amount,
)

_AMOUNTISH = re.compile(r"^\s*[+-]?\s*\(?[+-]?[$€£]?\s*[0-9]+(?:[ .,'][0-9]{3})*(?:[.,][0-9]{1,4})?\)?[+-]?\s*$")
_DECIMAL = re.compile(r"[.,][0-9]{1,2}\)?[+-]?\s*$")
_SAMPLE_ROWS = 500
_MIN_CONTINUITY = 0.8  # share of consecutive rows whose balance step equals the amount


def filled_cells(rec: list[Any]) -> int:
    """How many cells of a row hold something. A line that fills one cell only (a disclaimer, a 'Date
    downloaded' footer spread over the first column) is a note, not a record."""
    return sum(1 for c in rec if c is not None and str(c).strip())


def _columns(rows: list[tuple[int, list[Any]]], width: int) -> list[list[str]]:
    """The first rows' cells by column, notes left out: they say nothing about what a column holds."""
    records = [r for r in rows[:_SAMPLE_ROWS] if filled_cells(r[1]) >= 2] or rows[:_SAMPLE_ROWS]
    cols: list[list[str]] = [[] for _ in range(width)]
    for _, rec in records:
        for i in range(width):
            cols[i].append(str(rec[i]).strip() if i < len(rec) and rec[i] is not None else "")
    return cols


def is_currency_value(value: str) -> bool:
    """A cell that names a currency: a known ISO 4217 code or an unambiguous sign."""
    iso = normalise_currency(value)
    return iso is not None and (iso in iso_currencies() or value.strip().lower() in CURRENCY_SYMBOLS)


def currency_column(cols: list[list[str]], taken: set[int]) -> int | None:
    """The first free column whose non-empty cells (most rows have one) are 80% or more currency names."""
    for i, values in enumerate(cols):
        non_empty = [v for v in values if v]
        if i in taken or len(non_empty) < max(1, len(values) // 2):
            continue
        if sum(1 for v in non_empty if is_currency_value(v)) >= 0.8 * len(non_empty):
            return i
    return None


def _numeric_columns(cols: list[list[str]], taken: set[int], min_filled: float = 0.9) -> list[tuple[float, int]]:
    """(share of cells with cents, index) of the free columns that hold amounts in at least `min_filled` of the
    rows, most cents first."""
    out = []
    for i, values in enumerate(cols):
        non_empty = [v for v in values if v]
        if i in taken or not non_empty:
            continue
        if len(non_empty) < min_filled * len(values):
            continue
        numeric = sum(1 for v in non_empty if _AMOUNTISH.match(v)) / len(non_empty)
        cents = sum(1 for v in non_empty if _DECIMAL.search(v)) / len(non_empty)
        if cents < 0.5 and counter_or_id(non_empty):
            continue
        if numeric >= 0.9 and (cents >= 0.5 or len(non_empty) == len(values)):
            out.append((cents, i))
    return sorted(out, key=lambda t: (-t[0], t[1]))


def counter_or_id(values: list[str]) -> bool:
    """Whole numbers that count rows (1, 2, 3, ...) or identify them (eight digits or more, unsigned)."""
    if not all(v.isdigit() for v in values):
        return False
    ints = [int(v) for v in values]
    return len(ints) >= 3 and all(b - a == 1 for a, b in zip(ints, ints[1:])) or all(len(v) >= 8 for v in values)


def _decimals(values: list[str]) -> list[Decimal | None]:
    comma = detect_decimal_comma(values)
    out: list[Decimal | None] = []
    for v in values:
        try:
            out.append(parse_amount(v, comma)[0] if v else None)
        except ValueError:
            out.append(None)
    return out


def net_of(out_values: list[str], in_values: list[str]) -> list[str]:
    """in - out per row, as text, for a pair of one-sided money columns."""
    outs, ins = _decimals(out_values), _decimals(in_values)
    return [str((i or Decimal(0)) - (o or Decimal(0))) for o, i in zip(outs, ins)]


def balance_continuity(amounts: list[str], balances: list[str], newest_first: bool | None = None) -> float:
    """Share of consecutive rows where the balance moves by the amount, under the best of the ways exports print
    it (balance after or before the booking; oldest or newest first, unless `newest_first` says which). 0.0 with
    fewer than two steps."""
    amt, bal = _decimals(amounts), _decimals(balances)
    best, steps = 0.0, 0
    signs = (1, -1) if newest_first is None else ((-1,) if newest_first else (1,))
    for lag in (0, 1):  # balance after (the step is this row's amount) or before (the previous row's)
        for sign in signs:  # oldest first, or newest first
            hits = steps = 0
            for i in range(1, len(bal)):
                if bal[i] is None or bal[i - 1] is None:
                    continue
                a = amt[i - lag] if i - lag < len(amt) else None
                steps += 1
                hits += (bal[i] - bal[i - 1]) * sign == (a if a is not None else 0)  # no amount: no move
            if steps >= 2:
                best = max(best, hits / steps)
    return best


# Marks of a column that says which way an unsigned amount moves, as banks write them: debit first, credit second
# (English D/C, DR/CR; Lithuanian and Latvian D/K; German Soll/Haben S/H; Dutch Af/Bij; signs).
DIRECTION_MARKS: tuple[tuple[frozenset[str], frozenset[str]], ...] = tuple(
    (frozenset(d), frozenset(c)) for d, c in (
        (("D", "DR", "DEBIT"), ("C", "CR", "CREDIT")), (("D",), ("K",)), (("S", "SOLL"), ("H", "HABEN")),
        (("AF",), ("BIJ",)), (("-",), ("+",))))


def direction_marks(values: list[str]) -> tuple[frozenset[str], frozenset[str]] | None:
    """The (debit, credit) marks a column's cells are written in, or None when they are not such marks."""
    filled = {v.strip().upper() for v in values if v.strip()}
    if not filled:
        return None
    return next(((d, c) for d, c in DIRECTION_MARKS if filled <= d | c and filled & d), None)


_FLAG_SIDES = {"is credit": (frozenset({"FALSE"}), frozenset({"TRUE"})),
               "is debit": (frozenset({"TRUE"}), frozenset({"FALSE"}))}


def flag_marks(name: str, values: list[str]) -> tuple[frozenset[str], frozenset[str]] | None:
    """The (debit, credit) marks of a true/false column named for one side ('isCredit': true is money in)."""
    sides = _FLAG_SIDES.get(name)
    filled = {v.strip().upper() for v in values if v.strip()}
    return sides if sides and filled and filled <= {"TRUE", "FALSE"} else None


def direction_column(cols: list[list[str]], taken: set[int]) -> int | None:
    """The first free column, filled in most rows, whose cells are debit/credit marks."""
    for i, values in enumerate(cols):
        if i not in taken and sum(1 for v in values if v) >= 0.9 * len(values) and direction_marks(values):
            return i
    return None


def _fits(role: str, values: list[str]) -> bool:
    """Whether a column's cells hold what `role` needs (dates, amounts, currency names)."""
    filled = [v for v in values if v]
    if not filled:
        return False
    if role == "date":
        return choose_date_format(filled, min_share=0.6) is not None
    if role == "currency":
        return sum(1 for v in filled if is_currency_value(v)) >= 0.8 * len(filled)
    return sum(1 for v in filled if _AMOUNTISH.match(v)) >= 0.9 * len(filled)


def complete_roles(match: ColumnMatch, rows: list[tuple[int, list[Any]]], width: int) -> ColumnMatch:
    """`match` with the roles its header names left open filled in from the cells (see the module docstring).
    Roles the header's names give are kept as they are; a role only a word of a name gave ('Umsatz getätigt
    von' is no amount) is kept only where the cells fit it."""
    cols = _columns(rows, width)
    roles = {r: [i for i in v if i not in match.by_word or (i < width and _fits(r, cols[i]))]
             for r, v in match.roles.items()}
    roles = {r: v for r, v in roles.items() if v}
    taken = {i for v in roles.values() for i in v} | match.foreign_leg
    notes: list[str] = []
    undecided: dict[str, list[int]] = {}
    if "date" not in roles:
        for i, values in enumerate(cols):
            non_empty = [v for v in values if v]
            # 0.6: pending card payments leave 'Pending' where the booking date will be
            if (i not in taken and len(non_empty) >= max(1, len(values) // 2)
                    and choose_date_format(non_empty, min_share=0.6)):
                roles["date"] = [i]
                taken.add(i)
                notes.append(f"date: column {i + 1} (its cells are dates)")
                break
    if "currency" not in roles and (cur := currency_column(cols, taken)) is not None:
        roles["currency"] = [cur]
        taken.add(cur)
        notes.append(f"currency: column {cur + 1} (its cells are currency codes)")
    if not any(r in roles for r in ("amount", "debit", "credit")):
        numeric = _numeric_columns(cols, taken)
        full = {i for _, i in numeric}
        sparse = [i for _, i in _numeric_columns(cols, taken, min_filled=0.0) if i not in full]
        split_balance = [c for c in full if any(balance_continuity(net_of(cols[a], cols[b]), cols[c]) >= _MIN_CONTINUITY
                                                for a in sparse for b in sparse if a != b)]
        chosen = numeric[0][1] if len(numeric) == 1 and not split_balance else None
        if split_balance:
            # money out and money in in two one-sided columns, and the balance they move: which side is which is
            # for the reader of the names or the balance's direction (pipeline.infer.layouts), not a guess here
            roles["balance"] = split_balance[:1]
            taken.add(split_balance[0])
            undecided["amount"] = sparse
        elif len(numeric) > 1:
            # A running balance moves by the amount; the column it moves by is the amount. Without such a pair
            # the choice (gross, fee or net? amount or rate?) needs reading: it is left open, never guessed.
            pairs = [(balance_continuity(cols[a], cols[b]), a, b) for _, a in numeric for _, b in numeric if a != b]
            score, a, b = max(pairs, key=lambda t: t[0])
            if score >= _MIN_CONTINUITY:
                chosen = a
                roles["balance"] = [b]
                taken.add(b)
                notes.append(f"balance: column {b + 1} (it moves by column {a + 1} in {score:.0%} of rows)")
            else:
                undecided["amount"] = [i for _, i in numeric]
        elif not numeric and len(sparse) >= 2:  # one-sided columns: which is money in needs a name or a balance
            undecided["amount"] = sparse
        if chosen is not None:
            roles["amount"] = [chosen]
            taken.add(chosen)
            notes.append(f"amount: column {chosen + 1} (its cells are amounts)")
    if "direction" not in roles and (flag := direction_column(cols, taken)) is not None:
        roles["direction"] = [flag]
        taken.add(flag)
        notes.append(f"direction: column {flag + 1} (debit/credit marks)")
    if "description" not in roles and "counterparty" not in roles:  # the header named no text column
        text_cols = []
        for i, values in enumerate(cols):
            non_empty = [v for v in values if v]
            if i in taken or not non_empty or sum(1 for v in non_empty if is_currency_value(v)) >= 0.8 * len(non_empty):
                continue  # (a column of currency codes is no text)
            if sum(1 for v in non_empty if any(ch.isalpha() for ch in v)) / len(non_empty) >= 0.5:
                text_cols.append((sum(len(v) for v in non_empty) / len(values), i))
        text_cols.sort(reverse=True)
        for role in ("description", "counterparty"):
            if role not in roles and text_cols:
                roles[role] = [text_cols.pop(0)[1]]
    return ColumnMatch(roles=roles, header_currency=match.header_currency, notes=[*match.notes, *notes],
                       undecided=undecided, by_word=match.by_word, foreign_leg=match.foreign_leg)


def infer_roles(rows: list[tuple[int, list[Any]]], width: int) -> ColumnMatch:
    """Roles of a header-less table, all from the cells."""
    return complete_roles(ColumnMatch(), rows, width)


def looks_like_header(cells: list[Any]) -> bool:
    """A row of names: no cell is a number or a date, and most cells hold letters."""
    texts = [str(c).strip() for c in cells if c is not None and str(c).strip()]
    if len(texts) < 2:
        return False
    if any(_AMOUNTISH.match(t) or choose_date_format([t], min_share=1.0) for t in texts):
        return False
    return sum(1 for t in texts if any(ch.isalpha() for ch in t)) >= 0.5 * len(texts)
