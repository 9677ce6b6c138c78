"""Bank statements saved as laid-out text: what `pdftotext -layout` or a bank's "save as text" writes, one
transaction per line that opens with its date, amounts in the columns a header row names, wrapped descriptions on
the lines below.

No library reads this: ofxstatement's plugins each hard-code one bank's character positions. Here the page itself
says where things are: the header row's words (the column-name synonyms of delimited logs) give each money
column its role by position (debit, credit, amount, balance), a debit/credit mark beside an amount (Af/Bij, CR/DR)
gives its sign, and dates printed without a year take the year that places them in the span the statement's heading
prints. Tried on text that no delimited layout fits (never chosen by name). A file that does not bear
such a reading out (no dated lines with amounts, an order of day and month nothing decides, unsigned amounts with no
column or mark to sign them) is no text statement, and its error says which.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from functools import lru_cache

from pipeline.grounding.accounts import iban_candidates
from pipeline.ingest.columns import SYNONYMS, TOTAL_LABEL, normalise_header
from pipeline.ingest.formats.statement import Entry, Statement
from pipeline.ingest.infer_columns import DIRECTION_MARKS
from pipeline.ingest.statement_tables import statement_currency
from pipeline.ingest.tabular import NotATable, decode_candidates
from pipeline.ingest.values import (
    bic_currency,
    detect_decimal_comma,
    iban_currency,
    parse_amount,
)

# A date opening a line: day and month numeric with an optional year, a day and a month name (any language
# babel knows), or ISO.
_NUMERIC = re.compile(r"(?P<a>\d{1,2})(?P<sep>[./-])(?P<b>\d{1,2})(?:(?P=sep)(?P<y>\d{4}|\d{2}))?(?=\s|$)")
_NAMED = re.compile(r"(?P<d>\d{1,2})\.?[ -]?(?P<mon>[^\W\d_]{3,10})\.?(?:[ -](?P<y>\d{4}))?(?=\s|$)")
_ISO = re.compile(r"(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})(?=\s|$)")
# The same dates standing on their own in running text (not inside a reference such as "12/196250")
_STANDALONE = tuple(re.compile(r"(?<![\w/.-])" + p.pattern) for p in (_ISO, _NUMERIC, _NAMED))
_DATE_IN_TEXT = _STANDALONE[1]
# An amount with two decimals, thousands grouped by one space, point, comma or apostrophe (never by a run of
# spaces: that separates columns), a sign before ("- 500,00") or after, a CR/DR mark glued to it.
_MONEY = re.compile(r"(?<![\w.,/:'-])(?:(?P<lead>(?:(?<=\s)|^)[-+]) ?)?"
                    r"(?P<num>\d{1,3}(?:[ .,'\u00a0]\d{3})+[.,]\d{2}|\d+[.,]\d{2})"
                    r"(?P<trail>[-+])?(?P<glued>CR|DR|Cr|Dr)?(?![\w.,/])")
_MARK_AFTER = re.compile(r"\s{1,12}(?P<mark>[A-Za-z]{1,4})(?=\s|$)")  # '7,99      Af'
_MARKS = {m: sign for debit, credit in DIRECTION_MARKS for sign, marks in ((-1, debit), (1, credit))
          for m in marks if m.isalpha()}
# Words of a header that name a running balance (never the amount).
_BALANCE_WORDS = frozenset({"saldo", "solde", "balance", "kontostand", "zustatek", "egyenleg", "остаток", "stan"})
_MONEY_ROLES = ("debit", "credit", "amount")
_MONTH_LOCALES = ("en", "nl", "fr", "de", "es", "it", "pt", "pl", "cs", "sk", "hu", "ro", "sv", "da", "nb", "fi",
                  "lt", "lv", "et", "ru", "hr", "sl")


@lru_cache(maxsize=1)
def month_names() -> dict[str, int]:
    """Month names and abbreviations, lower case without accents or dots, in the languages banks print; a name
    two languages give different months is left out."""
    # lazy: CLDR tables load on first use
    from babel.dates import get_month_names

    seen: dict[str, set[int]] = {}
    for loc in _MONTH_LOCALES:
        for width in ("abbreviated", "wide"):
            for context in ("format", "stand-alone"):
                for number, name in get_month_names(width, context, loc).items():
                    seen.setdefault(normalise_header(name).replace(" ", ""), set()).add(number)
    return {name: months.pop() for name, months in seen.items() if len(months) == 1 and len(name) >= 3}


@dataclass(frozen=True)
class _Date:
    """A date as printed: day, month and year where the line has one; `numeric` dates wait for the file's order."""

    first: int
    second: int
    year: int | None
    numeric: bool
    end: int  # column after the date


def _year(text: str | None) -> int | None:
    if text is None:
        return None
    y = int(text)
    return y + 2000 if y < 100 else y


def date_at(line: str, pos: int) -> _Date | None:
    """The date printed at `pos` of a line, if one is."""
    if m := _ISO.match(line, pos):
        return _Date(int(m["d"]), int(m["m"]), int(m["y"]), False, m.end())
    if m := _NUMERIC.match(line, pos):
        return _Date(int(m["a"]), int(m["b"]), _year(m["y"]), True, m.end())
    if (m := _NAMED.match(line, pos)) and (month := month_names().get(normalise_header(m["mon"]))):
        return _Date(int(m["d"]), month, _year(m["y"]), False, m.end())
    return None


@dataclass(frozen=True)
class _Label:
    role: str  # debit | credit | amount | balance | date
    start: int
    end: int


@dataclass
class _Header:
    labels: list[_Label]
    text: str


_ROLE_OF_WORD = {normalise_header(w): role for role in (*_MONEY_ROLES, "date") for w in SYNONYMS[role]
                 if " " not in w and len(w) > 2}
_ROLE_OF_WORD.update({w: "balance" for w in _BALANCE_WORDS})


def _labels(line: str) -> list[_Label]:
    return [_Label(role, m.start(), m.end()) for m in re.finditer(r"\S+", line)
            if (role := _ROLE_OF_WORD.get(normalise_header(m.group(0))))]


def _header_at(lines: list[str], i: int) -> tuple[_Header, int] | None:
    """A header at line i and the line after it: a row of column names, with the rows right below it that hold no
    figure (a label set over two or three lines, "Bedrag / in euro's"), naming a date and a money column."""
    j, labels = i, []
    while j < len(lines) and j < i + 4 and lines[j].strip() and not re.search(r"\d", lines[j]):
        labels += _labels(lines[j])
        j += 1
    roles = {lb.role for lb in labels}
    if "date" not in roles or not roles & {*_MONEY_ROLES, "balance"}:
        return None
    return _Header(labels, "\n".join(lines[i:j])), j


@dataclass
class _Money:
    value_text: str
    start: int
    end: int
    sign: int  # -1, +1, or 0 where the value carries none
    label: _Label | None = None  # the header label over it (`_nearest`), set once its line's header is known


@dataclass
class _Line:
    number: int  # 1-based line of the file
    date: _Date
    description: list[str]
    money: list[_Money]
    header: _Header | None
    closed: bool  # printed after its listing's totals or closing balance, before another header
    extra: list[str] = field(default_factory=list)


def _money(line: str, start: int) -> list[_Money]:
    found = []
    for m in _MONEY.finditer(line, start):
        after = _MARK_AFTER.match(line, m.end())
        mark = (m["glued"] or (after["mark"] if after else "")).upper()
        signs = (m["lead"] or "") + (m["trail"] or "")
        sign = _MARKS.get(mark, 0) or (-1 if "-" in signs else 1 if "+" in signs else 0)
        found.append(_Money(m["num"], m.start(), m.end("num"), sign))
    return found


def _nearest(labels: list[_Label], token: _Money) -> _Label | None:
    """The header label over a printed value: the one whose columns overlap it, else the closest one."""
    if not labels:
        return None
    return min(labels, key=lambda lb: (max(0, lb.start - token.end, token.start - lb.end),
                                       abs((lb.start + lb.end) - (token.start + token.end))))


def _description(line: str, start: int, end: int) -> str:
    text = line[start:end].strip()
    while (d := date_at(text, 0)) is not None:
        text = text[d.end:].strip()  # a value date beside the booking date
    words = text.split()
    while words and _NUMERIC.fullmatch(words[-1]):
        words.pop()
    return " ".join(words)


def _lines(text: str) -> list[_Line]:
    """Every line that opens with a date, with the amounts printed on it (or, where the layout sets a movement's
    figures a line lower, on the next line without a date), under the latest header above it, and with the wrapped
    description lines below it."""
    raw = text.expandtabs().splitlines()
    out: list[_Line] = []
    header: _Header | None = None
    closed = False
    last: _Line | None = None
    i = 0
    while i < len(raw):
        line = raw[i]
        i += 1
        indent = len(line) - len(line.lstrip())
        if not line.strip():
            last = None
            continue
        if (found := _header_at(raw, i - 1)) is not None:
            (header, i), last, closed = found, None, False
            continue
        d = date_at(line, indent)
        money = _money(line, d.end if d is not None else indent)
        if d is not None:
            last = _Line(i, d, [_description(line, d.end, money[0].start if money else len(line))], money, header,
                         closed)
            out.append(last)
        elif money and TOTAL_LABEL.search(line):
            closed, last = True, None  # the listing's totals: what follows is not the listing
        elif last is not None and indent >= last.date.end - 2:
            if money and not last.money:
                last.money = money  # the figures of a movement set one line below its date
                last.extra.append(" ".join(line[:money[0].start].split()))
            elif not money:
                last.extra.append(" ".join(line.split()))  # a wrapped description
            else:
                last = None
        else:
            last = None
    for ln in out:
        for tok in ln.money:
            tok.label = _nearest(ln.header.labels, tok) if ln.header is not None else None
    return [ln for ln in out if ln.money]


def _order(lines: list[_Line], text: str) -> bool:
    """Whether numeric dates are day first: a first part over 12 can only be a day, a second part over 12 only a
    day in the other order. The movements' own dates decide (any contradiction among them leaves the order open);
    where they cannot, the dates standing alone in the rest of the text do, by a clear majority (a card's "11/23"
    expiry is among them)."""
    own = [(ln.date.first, ln.date.second) for ln in lines if ln.date.numeric]
    text_dates = [(int(m["a"]), int(m["b"])) for m in _DATE_IN_TEXT.finditer(text)]
    for parts, margin in ((own, None), (text_dates, 10)):
        day_first = sum(1 for a, b in parts if a > 12 >= b)
        month_first = sum(1 for a, b in parts if b > 12 >= a)
        if not day_first and not month_first:
            continue
        if margin is None and not (day_first and month_first):
            return day_first > 0
        if margin is not None and day_first >= margin * month_first:
            return True
        if margin is not None and month_first >= margin * day_first:
            return False
        break
    raise NotATable("a text statement whose dates could be day/month or month/day and no date of it decides")


def _day_month(d: _Date, day_first: bool) -> tuple[int, int]:
    return (d.first, d.second) if day_first or not d.numeric else (d.second, d.first)


def _full_dates(text: str, day_first: bool) -> list[date]:
    found = []
    for pattern in _STANDALONE:
        for m in pattern.finditer(text):
            d = date_at(text, m.start())
            if d is None or d.year is None:
                continue
            day, month = _day_month(d, day_first)
            try:
                found.append(date(d.year, month, day))
            except ValueError:
                continue
    return found


@dataclass(frozen=True)
class _Period:
    """What a statement's heading says of its dates: from its earliest (an opening balance's date) to its latest
    (the statement's date); a date printed without a year takes the year that places it in this span."""

    start: date | None
    end: date | None


_EARLY = timedelta(days=7)  # a movement may be booked a few days before the opening balance's date
_LATE = timedelta(days=31)  # ... or printed on a statement dated a little before it was booked


def _booked(d: _Date, day_first: bool, period: _Period, previous: date | None) -> date:
    """The date of a line; a yearless one in the statement's span (the later year of two that fit only when the
    listing, read in order, has moved past the earlier)."""
    day, month = _day_month(d, day_first)
    if d.year is not None:
        return date(d.year, month, day)
    if period.end is None:
        raise ValueError("a date without a year and no dated statement heading to take it from")
    low = period.start - _EARLY if period.start is not None else period.end - timedelta(days=365)
    fits = [booked for y in (period.end.year - 1, period.end.year) if low <= (booked := date(y, month, day))
            <= period.end + _LATE]
    if not fits:
        raise ValueError(f"{day:02d}/{month:02d} lies outside the statement's span ({low} to {period.end})")
    return next((b for b in fits if previous is None or b >= previous), fits[-1])


def _main_amount_column(lines: list[_Line]) -> dict[int, _Label]:
    """Per header, the amount column most lines fill (a card statement's amount in euros, not its sparse column of
    amounts in the foreign currency)."""
    best: dict[int, _Label] = {}
    counts: dict[tuple[int, _Label], int] = {}
    for ln in lines:
        if ln.header is None:
            continue
        for tok in ln.money:
            if (lb := tok.label) is not None and lb.role == "amount":
                counts[(id(ln.header), lb)] = counts.get((id(ln.header), lb), 0) + 1
    for (hid, lb), n in sorted(counts.items(), key=lambda kv: (kv[1], kv[0][1].end)):
        best[hid] = lb  # the most filled, the rightmost of equals, wins (sorted ascending)
    return best


def _amount(ln: _Line, main: dict[int, _Label], comma: bool) -> Decimal:
    """The line's signed amount, from the column its value sits under and the sign or mark beside it."""
    if ln.header is None:
        signed = [t for t in ln.money if t.sign]
        if len(ln.money) != 1 or not signed:
            raise ValueError("no header row names the money columns and the line's amount carries no sign or "
                             "debit/credit mark")
        tok, sign = signed[0], signed[0].sign
    else:
        picked = []
        for tok in ln.money:
            role = tok.label.role if tok.label is not None else None
            if role in ("debit", "credit") or (role == "amount" and main.get(id(ln.header)) == tok.label):
                picked.append((tok, role))
        if len(picked) != 1:
            raise ValueError("no value under the header's amount, debit or credit column" if not picked else
                             "values under more than one of the header's amount, debit and credit columns")
        tok, role = picked[0]
        sign = -1 if role == "debit" else 1 if role == "credit" else tok.sign or 1
        if role != "amount" and tok.sign:
            sign *= tok.sign  # a negative value in the credit column is a reversal
    value, _ = parse_amount(tok.value_text, comma)
    if value is None:
        raise ValueError("empty amount")
    return abs(value) * sign


_SAME_MOVEMENT = timedelta(days=7)  # a detail listing may print the operation date, the main one the booking date
_AFTER_TOTALS = ("after totals",)


def _repeat_of(booked: date, ln: _Line, comma: bool, listed: list[tuple[date, Decimal, tuple[str, ...], int]],
               kind: tuple[str, ...]) -> str | None:
    """Why a line repeats a movement already listed, or None: the same amount within a week in another listing
    (a detail listing of direct debits or fees under its own header, or after the main listing's totals). Each
    listed movement is repeated at most once."""
    values = {abs(v) for t in ln.money if (v := parse_amount(t.value_text, comma)[0]) is not None}
    for i, (day, amount, k, number) in enumerate(listed):
        if k != kind and abs(amount) in values and abs(day - booked) <= _SAME_MOVEMENT:
            del listed[i]
            return f"repeats the movement of line {number} (the same amount within a week) in a detail listing"
    return None


def _kind(header: _Header | None) -> tuple[str, ...]:
    """What a header's columns are, in reading order: the same on every page of one listing, another for a detail
    listing that repeats movements of the main one."""
    return tuple(lb.role for lb in header.labels) if header is not None else ()


def _currency(text: str, headers: list[_Header]) -> str | None:
    """The statement's currency: named in a money column's header ("EUROS", "in euro's"), else the country of an
    IBAN it prints, else of its bank's labelled BIC, else a currency sign or name printed with its figures."""
    for h in headers:
        if code := statement_currency(h.text):
            return code
    for iban in iban_candidates(text):
        if code := iban_currency(iban):
            return code
    return bic_currency(text) or statement_currency(text)


def read(data: bytes) -> Statement:
    text = decode_candidates(data)[0][1]
    lines = _lines(text)
    if not lines:
        raise NotATable("no line opens with a date and prints an amount")
    if any(ln.header is None for ln in lines) and all(not t.sign for ln in lines for t in ln.money):
        raise NotATable("amounts carry no sign or debit/credit mark and no header row names their columns")
    day_first = _order(lines, text) if any(ln.date.numeric for ln in lines) else True
    heading = _full_dates("\n".join(text.splitlines()[:lines[0].number - 1]), day_first)
    end = max(heading) if heading else max(_full_dates(text, day_first), default=None)
    start = min(heading) if heading else None
    spans_dates = end is not None and start is not None and timedelta(0) < end - start <= timedelta(days=400)
    period = _Period(start if spans_dates else None, end)
    comma = detect_decimal_comma([t.value_text for ln in lines for t in ln.money])
    main = _main_amount_column(lines)
    headers = list({id(ln.header): ln.header for ln in lines if ln.header is not None}.values())
    currency = _currency(text, headers)
    account = next(iter(iban_candidates(text)), None)
    st = Statement(format="text statement", row_unit="line",
                   notes=[f"dates {'day' if day_first else 'month'} first",
                          f"statement dates {period.start} to {period.end}" if period.end else "no statement date"])
    listed: list[tuple[date, Decimal, tuple[str, ...], int]] = []
    previous: date | None = None
    for ln in lines:
        kind = _AFTER_TOTALS if ln.closed else _kind(ln.header)
        try:
            booked = previous = _booked(ln.date, day_first, period, previous)
            if (repeat := _repeat_of(booked, ln, comma, listed, kind)) is not None:
                st.not_transactions.append((ln.number, repeat))
                continue
            if ln.closed:
                raise ValueError("a dated amount after the listing's totals that repeats no movement listed above")
            amount = _amount(ln, main, comma)
        except ValueError as exc:
            st.bad.append((ln.number, str(exc)))
            continue
        listed.append((booked, amount, kind, ln.number))
        desc = " | ".join(x for x in (*ln.description, *ln.extra) if x) or None
        st.entries.append(Entry(source_row=ln.number, booked=booked, amount=amount, currency=currency,
                                account=account, description=desc))
    if not st.entries:  # a reading that books nothing is no reading: the file's error says why
        raise NotATable(f"none of its {len(st.bad)} dated lines with amounts reads as a movement "
                        f"(line {st.bad[0][0]}: {st.bad[0][1]})" if st.bad else "it books no movement")
    return st
