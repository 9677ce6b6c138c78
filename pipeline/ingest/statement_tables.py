"""Financial statements read as tables from a filing's text: the income statement, balance sheet and cash-flow
statement of a PDF, Markdown or HTML filing without inline XBRL.

    statement_facts(pages) -> list[FilingFact]   (method "table")

A statement is found by its title ("Consolidated Statements of Operations", "Income Statements", "Balance Sheets",
"Statements of Cash Flows", ...) on a page, not in a contents list (a title followed by a page number). Below it:
- header lines, up to the first row of figures: the periods of the columns ("Three Months Ended September 30, 2023
  2022", "Years ended September 28, 2024 | September 30, 2023", "Six Months Ended June 30, 2023 2022") and the printed
  scale ("In millions, except per share amounts"; shares may carry their own: "shares in thousands");
- rows: a label and one figure per column; `(1,468)` is negative, `—` is zero, `$` and `%` are decoration. A label
  line without figures ("Earnings per share:") heads the rows under it, so "Diluted" there is diluted EPS.
A row's label maps to the US-GAAP element an analyst asks for (`CONCEPTS`: standard labels and their common
variants); rows that map to none are not facts. Values are in full units (scale applied, per-share amounts not).

Why by hand: the PDF table extractors (camelot, pdfplumber's tables) need ruling lines or word positions, and the
same reader must serve Markdown and HTML text; none maps a row to its reporting concept or a column to its period.
A statement's rows are one label and a run of figures per line (PDFium's text of a PDF page keeps them so:
pipeline.ingest.pdf_text.table_page_texts), which this reader takes as such.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal

from dateutil.relativedelta import relativedelta

from pipeline.ingest.facts import FilingFact, period_months
from pipeline.ingest.filing_cover import read_cover

PARSER_VERSION = "statements-2"  # part of each table fact's row id; 2: the headers, labels and per-share rows of
# docs/eval/filing-facts.md's four FinanceBench slices

_SPACE = re.compile(r"[ \t\u00a0\u2002-\u200b]+")
_TITLE = re.compile(
    r"^(?:[\w.,&'’ ]{0,60}?\b)?(?:condensed\s+)?(?:consolidated\s+)?(?:condensed\s+)?(?:interim\s+)?"
    r"(?P<kind>(?:income|earnings)\s+statements?|statements?\s+of\s+(?:consolidated\s+)?"
    r"(?:operations(?:\s+and\s+comprehensive\s+(?:income|loss))?|income|earnings|comprehensive\s+income|"
    r"(?:comprehensive\s+)?(?:loss|income\s+\(loss\))|cash\s+flows?|financial\s+position)|balance\s+sheets?)"
    r"\s*(?:\((?:unaudited|continued)\))?"
    r"(?:\s+[\w.,&'’ -]{2,60}?\s+and\s+(?:consolidated\s+)?subsidiar(?:y|ies)(?:\s+companies)?)?\s*$", re.I)
# the title may carry the reporting entity after it ("... of Income Verizon Communications Inc. and Subsidiaries")
_KIND = {"income": "income", "earnings": "income", "operations": "income", "loss": "income",
         "cash": "cash_flow", "financial": "balance", "balance": "balance"}
_SYM = r"(?:[$€£¥]|[CA]\$)"  # a currency symbol printed before a figure: decoration
_NUM = rf"\(?-?{_SYM}?\(?\d[\d,]*(?:\.\d+)?\)?%?|\(?[—–-]\)?"
_TOKEN = re.compile(_NUM)  # one figure as a whitespace-separated word: 1,234  (1,468)  $15.5  -565  12%  —
_DECORATION = re.compile(rf"{_SYM}|\(|\)|%")  # words of a figure printed apart from it: "$ 1,234", "(174 )"
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DATE = re.compile(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(\d{1,2})\b"
                   r"(?:,?\s*((?:19|20)\d\d))?", re.I)
_YEAR = re.compile(r"(?<![\d,.])((?:19|20)\d\d)(?![\d.]|,\d)")  # "2020, 2019" are years; "2,020" is not
_DURATION = re.compile(r"\b(three|six|nine|twelve|3|6|9|12|thirteen|twenty-six|thirty-nine|fifty-two|13|26|39|52)"
                       r"[\s-]+(months?|weeks?)\s+ended\b|\b(?:fiscal\s+)?(years?|quarters?)\s+ended\b", re.I)
_DURATION_MONTHS = {"three": 3, "3": 3, "six": 6, "6": 6, "nine": 9, "9": 9, "twelve": 12, "12": 12}
_WEEKS_MONTHS = {"thirteen": 3, "13": 3, "twenty-six": 6, "26": 6, "thirty-nine": 9, "39": 9, "fifty-two": 12, "52": 12}
_SCALE = re.compile(r"\b(thousands|millions|billions)\b", re.I)  # searched in the header only
_SHARE_SCALE = re.compile(r"shares?\b[^.;)]*?\b(?:in|reflected\s+in)\s+(thousands|millions|billions)\b", re.I)
_SCALES = {"thousands": 3, "millions": 6, "billions": 9}
_PERIOD_WORD = re.compile(r"\b(ended|months?|weeks?|years?|quarters?|as\s+of|at|unaudited|thousands|millions|"
                          r"billions)\b|" + "|".join(rf"\b{m}[a-z]*\b" for m in _MONTHS), re.I)


@dataclass(frozen=True)
class Concept:
    """A reporting concept and the row labels that state it in a statement of `kind`."""

    name: str
    kind: str  # income | balance | cash_flow
    label: re.Pattern[str]
    unit: str = "USD"  # USD | USD/shares | shares; USD stands for the statement's currency
    absolute: bool = False  # the concept is positive where the statement prints an outflow negative
    prefer: re.Pattern[str] | None = None  # of several rows stating it, the one whose label says this


def _c(name: str, kind: str, label: str, unit: str = "USD", absolute: bool = False,
       prefer: str | None = None) -> Concept:
    return Concept(name, kind, re.compile(rf"^(?:{label})$", re.I), unit, absolute,
                   re.compile(prefer, re.I) if prefer else None)


# what a statement calls its bottom line, "(loss)" printed with it ("income (loss)", "income/(loss)") or not
_EARN = r"(?:(?:earnings|income|loss)(?:\s+\(loss\)|\s*/\s*\(loss\))?|\(loss\)\s+(?:income|earnings))"
# the owners a share of income is attributed to, where they are the parent's: not the non-controlling (minority)
# interests, wherever the label names them ("to redeemable and noncontrolling interests")
_PARENT = r"(?![\w.,&'’ -]*\b(?:non-?controlling|minority)\b)[\w.,&'’ -]+"
_EPS_HEAD = r"(earnings|income|loss).*per\s+(common\s+)?share|per\s+share"
_SHARES_HEAD = r"weighted|shares\s+(used|outstanding)|number\s+of\s+(common\s+)?shares|share\s+count"
# US-GAAP element names; labels as filings print them (the taxonomy's standard label and its common variants).
CONCEPTS: tuple[Concept, ...] = (
    _c("us-gaap:Revenues", "income",
       r"(total\s+)?(net\s+)?(operating\s+)?(revenues?|sales)(,\s*net)?|total\s+net\s+(revenues?|sales)|"
       r"revenues?,?\s+net|(net\s+)?sales\s+to\s+customers", prefer=r"^total"),
    _c("us-gaap:GrossProfit", "income", r"(total\s+)?gross\s+(margin|profit)(\s+\(loss\))?"),
    _c("us-gaap:ResearchAndDevelopmentExpense", "income", r"research\s+and\s+development(\s+expenses?)?"),
    _c("us-gaap:OperatingIncomeLoss", "income",
       r"(total\s+)?operating\s+(income|earnings|loss|income\s+\(loss\)|\(loss\)\s+income)|"
       r"(income|loss|income\s+\(loss\)|\(loss\)\s+income)\s+from\s+operations"),
    _c("us-gaap:IncomeTaxExpenseBenefit", "income",
       r"(provision\s+for|\(?benefit\)?\s+(from|for)|income\s+tax\s+(expense|provision))[\s(a-z)]*taxes?|"
       r"provision\s+for\s+(income\s+)?taxes|income\s+tax\s+(expense|provision)(\s+\(benefit\))?"),
    _c("us-gaap:NetIncomeLoss", "income",
       rf"(consolidated\s+)?net\s+({_EARN}|loss\s+and\s+comprehensive\s+loss)"
       rf"(\s+attributable\s+to\s+{_PARENT})?",
       prefer=r"attributable\s+to"),  # the parent's share, where the statement splits out non-controlling interests
    _c("us-gaap:EarningsPerShareBasicAndDiluted", "income",
       rf"(net\s+)?{_EARN}\s+per\s+"
       r"(common\s+)?share[\w\s,.'’—–-]*basic\s+(and|&)\s+diluted|basic\s+(and|&)\s+diluted(\s+\(?\$?\)?)?|"
       rf"basic\s+(and|&)\s+diluted\s+(net\s+)?{_EARN}\s+per\s+"
       r"(common\s+)?share[\w\s.,&'’—–-]*",
       unit="USD/shares"),
    _c("us-gaap:EarningsPerShareDiluted", "income",
       rf"(net\s+)?{_EARN}\s+per\s+(common\s+)?share[\w\s,—–-]*"
       rf"diluted|diluted(\s+net)?\s+{_EARN}\s+per\s+(common\s+)?"
       r"share[\w\s.,&'—–-]*|diluted(\s+\(?\$?\)?)?", unit="USD/shares"),
    _c("us-gaap:EarningsPerShareBasic", "income",
       rf"(net\s+)?{_EARN}\s+per\s+(common\s+)?share[\w\s,—–-]*"
       rf"basic|basic(\s+net)?\s+{_EARN}\s+per\s+(common\s+)?"
       r"share[\w\s.,&'—–-]*|basic(\s+\(?\$?\)?)?", unit="USD/shares"),
    _c("us-gaap:WeightedAverageNumberOfDilutedSharesOutstanding", "income",
       r"diluted|weighted[\s-]+average\s+(number\s+of\s+)?diluted\s+(common\s+)?shares(\s+outstanding)?",
       unit="shares"),
    _c("us-gaap:Assets", "balance", r"total\s+assets"),
    _c("us-gaap:Liabilities", "balance", r"total\s+liabilities"),
    _c("us-gaap:StockholdersEquity", "balance",
       r"total\s+(stockholders|shareholders)['’]?\s+equity(\s+\(deficit\))?"),
    _c("us-gaap:LiabilitiesAndStockholdersEquity", "balance",
       r"total\s+liabilities\s+and\s+(stockholders|shareholders)['’]?\s+equity(\s+\(deficit\))?"),
    _c("us-gaap:CashAndCashEquivalentsAtCarryingValue", "balance", r"cash\s+and\s+cash\s+equivalents"),
    _c("us-gaap:NetCashProvidedByUsedInOperatingActivities", "cash_flow",
       r"net\s+cash\s+(provided\s+by|from|\(used\s+in\)\s+provided\s+by|provided\s+by\s+\(used\s+in\)|used\s+in)\s+"
       r"operating\s+activities|cash\s+generated\s+by\s+operating\s+activities|net\s+cash\s+from\s+operations"),
    _c("us-gaap:PaymentsToAcquirePropertyPlantAndEquipment", "cash_flow",
       r"(additions\s+to|purchases?\s+of|payments\s+for\s+(the\s+)?acquisition\s+of|acquisition\s+of)\s+property,?\s+"
       r"(plant\s+)?and\s+equipment(,\s*net)?|capital\s+expenditures", absolute=True),
)


@dataclass
class _Row:
    label: str
    values: list[Decimal | None]  # None: a dash (no amount)
    line: str


def _lines(page: str) -> list[str]:
    """A page's lines, whitespace collapsed; a Markdown table that did not render (one long `|` line) becomes one
    line per row: a cell with letters starts a row, cells of figures follow it."""
    out: list[str] = []
    for raw in page.splitlines():
        line = _SPACE.sub(" ", raw).strip()
        if line.count("|") < 4:
            if line:
                out.append(line)
            continue
        cells = [c.strip() for c in line.split("|")]
        current: list[str] = []
        for cell in cells:
            if not cell or re.fullmatch(r":?-{2,}:?|%", cell):
                continue
            if re.fullmatch(r"[$€£¥]", cell):  # decoration of the figure that follows; it names the currency
                current.append(cell)
                continue
            if re.search(r"[A-Za-z]", cell) and not _TOKEN.fullmatch(cell):
                if current:
                    out.append(" ".join(current))
                current = [cell]
            else:
                current.append(cell)
        if current:
            out.append(" ".join(current))
    return _words_joined([piece for line in out for piece in _rows_of(line)])


_MONEY = re.compile(r"[$,.()—–]")  # a figure that is an amount, not a year or a count


def _rows_of(line: str) -> list[str]:
    """A line holding several statement rows, as some PDFs' text runs them together ("Revenues $ 31,615 $ 29,697
    Cost of revenues 19,168 17,332 ..."), cut after each run of two or more figures, one an amount, that a label
    follows."""
    words = line.split(" ")
    pieces: list[str] = []
    start = run = money = 0
    for i, w in enumerate(words):
        if _TOKEN.fullmatch(w):
            run += 1
            money += bool(_MONEY.search(w))
            continue
        if _DECORATION.fullmatch(w):
            continue
        if run >= 2 and money and w[:1].isalpha():
            pieces.append(" ".join(words[start:i]))
            start = i
        run = money = 0
    pieces.append(" ".join(words[start:]))
    return [p for p in pieces if p]


_WORD_LINE = re.compile(r"[^\W\d_][\w'’.,&()-]*:?")  # one word, no figure


def _words_joined(lines: list[str]) -> list[str]:
    """Runs of two or more lines of one word each, as some PDFs print a title or a label in a narrow cell
    ("CONSOLIDATED" / "STATEMENTS" / "OF" / "OPERATIONS"), as one line."""
    out: list[str] = []
    run: list[str] = []
    for line in [*lines, ""]:
        if line and _WORD_LINE.fullmatch(line):
            run.append(line)
            continue
        if len(run) >= 2:
            out.append(" ".join(run))
        else:
            out.extend(run)
        run = []
        if line:
            out.append(line)
    return out


def _value(token: str) -> Decimal | None:
    t = re.sub(r"[$€£¥CA ]|%", "", token)
    if re.fullmatch(r"\(?[—–-]\)?", t):
        return None
    negative = t.startswith("(") or t.startswith("-")
    digits = t.strip("()-").replace(",", "")
    try:
        number = Decimal(digits)
    except ArithmeticError:
        return None
    return -number if negative else number


_NOTE_REF = re.compile(r"\s*\((?:see\s+)?notes?\s+[\dA-Z]+(?:\s*(?:,|and|&)\s*[\dA-Z]+)*\)", re.I)


def _row(line: str) -> _Row | None:
    """A label followed by figures; None when the line has no figures. A reference to a note ("(Note 12)") is not
    a figure."""
    line = _NOTE_REF.sub("", line)
    words = line.split()
    start = len(words)  # the run of figure words at the end of the line, read word by word (linear, no regex
    while start and (_TOKEN.fullmatch(words[start - 1]) or _DECORATION.fullmatch(words[start - 1])):  # backtracking)
        start -= 1
    values: list[Decimal | None] = []
    negative = False
    for w in words[start:]:
        if w == "(":
            negative = True
        elif _TOKEN.fullmatch(w):
            v = _value(w)
            values.append(-v if negative and v is not None and v > 0 else v)
            negative = False
    if not values:
        return None
    label = " ".join(words[:start]).rstrip(" $€£¥:").strip()
    return _Row(label, values, line)


def _is_header(row: _Row | None) -> bool:
    """A line of the column header: periods, dates, years, the scale (before the first row of figures)."""
    if row is None:
        return True
    values = [v for v in row.values if v is not None]
    # the column years ("2019 2018 2017", "2023 2022 2023 2022"): whole numbers within a few years of each other
    years = bool(values) and all(v == v.to_integral() and 1990 <= v <= 2100 for v in values) and (
        max(values) - min(values) <= 5) and not any("," in w for w in row.line.split()[-len(values):])
    return bool(_PERIOD_WORD.search(row.label)) or years


def _months(text: str) -> list[int]:
    out = []
    for m in _DURATION.finditer(text):
        if m.group(1):
            n = m.group(1).lower()
            out.append(_DURATION_MONTHS.get(n) or _WEEKS_MONTHS[n])
        else:
            out.append(3 if m.group(3).lower().startswith("quarter") else 12)
    return out


def _month_number(name: str) -> int:
    return _MONTHS.index(name[:3].lower()) + 1


Period = tuple[dt.date | None, dt.date]  # (start, end); an instant (balance sheet) has no start


def _column_periods(header: str, n: int, kind: str, cover: _Cover | None = None) -> list[Period | None] | None:
    """(start, end) of each of `n` columns from the header text, None for a column whose period the header leaves
    open, or None when it states none. A header of years only ("2015 2014 2013") takes its period end from the
    filing's cover (`cover`: the annual report's fiscal year end)."""
    dates = [(m.group(1), int(m.group(2)), m.group(3)) for m in _DATE.finditer(header)]
    full = [(mon, day, int(y)) for mon, day, y in dates if y]
    ends: list[dt.date | None]
    if len(full) == n:
        ends = [_safe_date(y, _month_number(mon), day) for mon, day, y in full]
    else:
        years = _once(_once([int(y) for y in _YEAR.findall(header)], n), n)  # in the order printed
        month_days = _once([(mon.lower()[:3], day) for mon, day, _ in dates], 1)  # "December 31" printed twice
        if len(years) != n:
            return None
        if not month_days:
            return _cover_periods(years, kind, header, cover)
        per = n // len(month_days) if n % len(month_days) == 0 else 0
        if not per:
            return None
        ends = [_safe_date(y, _month_number(month_days[i // per][0]), month_days[i // per][1])
                for i, y in enumerate(years)]
    if any(e is None for e in ends):
        return None
    return _with_starts(ends, kind, _months(header) or _years_apart(ends, cover))


def _years_apart(ends: list[dt.date | None], cover: _Cover | None) -> list[int]:
    """[12] where a header names no duration but the statement is an annual report's and its columns end a year
    apart, one after the other ("December 29, 2018 | December 30, 2017 | December 31, 2016"): its years."""
    known = [e for e in ends if e is not None]
    if cover is None or not cover.annual or len(known) < 2 or len(known) != len(ends):
        return []
    gaps = [(a - b).days for a, b in zip(known, known[1:])]
    return [12] if all(abs(g - 365) <= 14 for g in gaps) else []


def _once(values: list, n: int) -> list:
    """`values` printed k times over ("... 2020, 2019, and 2018" above "2020 2019 2018") as one copy of n."""
    if len(values) > n and len(values) % n == 0 and values == values[:n] * (len(values) // n):
        return values[:n]
    return values


def _with_starts(ends: list[dt.date | None], kind: str, months: list[int]) -> list[Period | None] | None:
    """Columns ending at `ends`, of the durations the header prints: k durations over n columns span n/k columns
    each; where k does not divide n (a transition period: "12 Months Ended 11 Months Ended" over three columns) only
    the first column's duration is certain, the first printed one, and the others stay open."""
    if kind == "balance":
        return [(None, e) if e else None for e in ends]
    n = len(ends)
    if not months:
        return None
    if n % len(months):
        spans: list[int | None] = [months[0]] + [None] * (n - 1)
    else:
        spans = [months[i // (n // len(months))] for i in range(n)]
    out: list[Period | None] = []
    for i, (e, m) in enumerate(zip(ends, spans)):
        if e is None or m is None:
            out.append(None)
            continue
        start = (e + dt.timedelta(days=1)) - relativedelta(months=m)
        before = ends[i + 1] if i + 1 < n else None  # the next column ends where this one starts (52/53-week years)
        if before is not None and abs((before + dt.timedelta(days=1) - start).days) <= 10:
            start = before + dt.timedelta(days=1)
        out.append((start, e))
    return out


@dataclass(frozen=True)
class _Cover:
    """What the cover says of the report's period: its end, and whether it is an annual report."""

    end: dt.date
    annual: bool


def _cover(pages: list[str]) -> _Cover | None:
    cover = read_cover("\n".join(pages[:3]))
    if cover is None or cover.period_end is None:
        return None
    return _Cover(dt.date.fromisoformat(cover.period_end), cover.form_type in ("10-K", "annual_report"))


def _cover_periods(years: list[int], kind: str, header: str, cover: _Cover | None) -> list[Period | None] | None:
    """Columns headed by years only. The latest (first) column is the cover's fiscal year where its year names it:
    the year the period ends in, or the one before for a year ending in January or February (retailers' "fiscal
    2019" ends early in 2020). Earlier columns end on the same day of their years only where the year ends on a
    month's last day; a 52/53-week year's earlier ends are not stated, and those columns stay open."""
    if cover is None or years[0] != max(years):
        return None
    end = cover.end
    if years[0] != end.year and not (years[0] == end.year - 1 and end.month <= 2):
        return None
    months = _months(header) or ([12] if cover.annual else [])
    month_end = (end + dt.timedelta(days=1)).day == 1
    ends = [end] + [_safe_date(end.year - (years[0] - y), end.month, end.day) if month_end else None
                    for y in years[1:]]
    return _with_starts(ends, kind, months)


def _safe_date(y: int, m: int, d: int) -> dt.date | None:
    try:
        return dt.date(y, m, d)
    except ValueError:
        return None


@dataclass
class _Statement:
    kind: str
    title: str
    page: int
    header: list[str]
    rows: list[_Row]


def _statements(pages: list[str]) -> list[_Statement]:
    found: list[_Statement] = []
    for number, page in enumerate(pages, start=1):
        lines = _lines(page)
        for i, line in enumerate(lines):
            m = _TITLE.match(line)
            if not m or len(line.split()) > 14:
                continue
            word = m.group("kind").lower().split()
            kind = next((_KIND[w] for w in (*word[2:], *word) if w in _KIND), "income")
            if "comprehensive" in line.lower() and "operations" not in line.lower():
                kind = "comprehensive"
            header: list[str] = []
            rows: list[_Row] = []
            for nxt in lines[i + 1:]:
                if _TITLE.match(nxt) and rows:
                    break
                row = _row(nxt)
                if not rows and _is_header(row):
                    header.append(nxt)
                    if len(header) > 12:
                        break
                    continue
                if not rows and row is not None and not row.label and len(row.values) == 1:
                    continue  # a page number printed between the title and the column header
                rows.append(row if row is not None else _Row(nxt.rstrip(":"), [], nxt))
            if sum(1 for r in rows if r.values and r.label) >= 4:
                found.append(_Statement(kind, line, number, header, rows))
    return found


_CURRENCIES = (("CAD", r"C\$|\bCAD\b|canadian\s+dollars"), ("AUD", r"A\$|\bAUD\b|australian\s+dollars"),
               ("EUR", r"€|\bEUR\b|\beuros?\b"), ("GBP", r"£|\bGBP\b|\bsterling\b|\bpounds\b"),
               ("JPY", r"¥|\bJPY\b|\byen\b"), ("CHF", r"\bCHF\b|swiss\s+francs"),
               ("USD", r"\$|\bUSD\b|\bdollars\b"))


def statement_currency(text: str) -> str | None:
    """The currency a statement prints its amounts in (its symbol or name in the header or rows), or None."""
    return next((code for code, pattern in _CURRENCIES if re.search(pattern, text, re.I)), None)


def _scale(text: str) -> tuple[int, int]:
    """(power of ten of amounts, of share counts) the header prints ("in millions"; shares may have their own)."""
    m = _SCALE.search(text)
    amount = _SCALES[m.group(1).lower()] if m else 0
    s = _SHARE_SCALE.search(text)
    return amount, _SCALES[s.group(1).lower()] if s else amount


def _unit(concept: Concept, currency: str | None) -> str | None:
    """The concept's unit in the statement's currency; a money unit stays unknown where no currency is printed."""
    if "USD" not in concept.unit:
        return concept.unit
    return concept.unit.replace("USD", currency) if currency else None


def _facts_of(st: _Statement, cover: _Cover | None = None) -> list[FilingFact]:
    counts = Counter(len(r.values) for r in st.rows if r.values)
    if not counts:
        return []
    n = counts.most_common(1)[0][0]
    header = " ".join([st.title, *st.header])
    periods = _column_periods(header, n, st.kind, cover)
    if periods is None:
        return []
    amount_scale, share_scale = _scale(header)
    currency = statement_currency(" ".join([header, *(r.line for r in st.rows)]))
    chosen: dict[str, tuple[Concept, _Row]] = {}
    # the line above the first row heads it where it is a label, not a period or the scale ("Revenues:")
    last = st.header[-1] if st.header else ""
    heading = last.rstrip(":") if last and _row(last) is None and not _PERIOD_WORD.search(last) else ""
    for row in _joined(st.rows):
        if not row.values:
            heading = row.label
            continue
        values = row.values
        if len(values) == n + 1 and _footnote_mark(row.line):
            values = values[1:]
        if not row.label and heading:  # a total printed without a label closes the rows under its heading
            row = _Row(f"Total {heading}", row.values, row.line)
        concept = _concept(row.label, heading, st.kind) if len(values) == n else None
        if concept is None and len(values) == n and heading and row.label[:1].isupper():
            # a label wrapped over lines ("Net income attributable to MGM Resorts" / "International $ 466,772"):
            # the line above, read as a heading, and this row's words are one label
            # (amounts only: under "Diluted earnings per share", "Continuing operations" is not the diluted EPS)
            label = f"{heading} {row.label}"
            concept = _concept(label, "", st.kind)
            concept = concept if concept is not None and concept.unit == "USD" else None
            row = _Row(label, row.values, row.line) if concept is not None else row
        if concept is None:
            continue
        if concept.name not in chosen or (concept.prefer is not None and concept.prefer.search(row.label)
                                          and not concept.prefer.search(chosen[concept.name][1].label)):
            chosen[concept.name] = (concept, _Row(row.label, values, row.line))
    facts: list[FilingFact] = []
    for concept, row in chosen.values():
        scale = 0 if concept.unit == "USD/shares" else share_scale if concept.unit == "shares" else amount_scale
        for col, (value, period) in enumerate(zip(row.values, periods)):
            if value is None or period is None:
                continue
            start, end = period
            v = abs(value) if concept.absolute else value
            facts.append(FilingFact(concept=concept.name, period_start=start.isoformat() if start else None,
                                    period_end=end.isoformat(), dimensions=None, unit=_unit(concept, currency),
                                    value=v.scaleb(scale), scale=scale, decimals=None, page=st.page,
                                    context=f"table p{st.page} col{col + 1}", method="table", label=row.label))
    return facts


_HEAD_COLON = re.compile(r"^(.+?):\s+((?:basic|diluted)\b.*)$", re.I)
_DANGLING = re.compile(r"\b(?:to|of|and|for|from|by|in|attributable)$", re.I)


def _joined(rows: list[_Row]) -> list[_Row]:
    """Rows with a label wrapped over two lines joined: a line without figures followed by one whose label starts in
    lower case ("Income from continuing operations ..., net" / "of tax $ 0.06 $ 0.45"), or one ending in a word that
    needs the next ("Earnings per common share attributable to" / "Corning Incorporated"), is one row, and not a
    heading of the rows under it; a label printed on the line above its figures ("Basic Net Income Per Share" /
    "$ 2.09 $ 1.51") is that row's label; and a heading
    printed before the row's own label ("Earnings per share: Basic") heads the rows below too."""
    out: list[_Row] = []
    for row in rows:
        split = _HEAD_COLON.match(row.label) if row.values else None
        if split:  # "Earnings per share: Basic $ 10.10 ...": the heading of this row and of the "Diluted" below
            out.append(_Row(split.group(1), [], split.group(1)))
            row = _Row(split.group(2), row.values, row.line)
        head = out[-1] if out and not out[-1].values and out[-1].label else None
        if head is not None and (row.label[:1].islower() or _DANGLING.search(head.label)):
            out.pop()
            row = _Row(f"{head.label} {row.label}", row.values, f"{head.line} {row.line}")
        elif head is not None and not row.label and row.values:
            out.pop()  # a footnote mark before the figures is the label's, dropped by _footnote_mark
            row = _Row(head.label, row.values, f"{head.line} {row.line}")
        out.append(row)
    return out


def _footnote_mark(line: str) -> bool:
    """A footnote marker printed after the label ("Net Income Per Share 1 $ 0.88 ..."): a single digit, not an
    amount, directly after a word."""
    return bool(re.search(r"[A-Za-z)]\s*[1-9]\s+\$?\s*[\d(]", line))


# "Net earnings per share attributable to Foot Locker, Inc." under "Diluted earnings per share"
_PER_SHARE = re.compile(rf"^(net\s+)?{_EARN}\s+per\s+(common\s+)?share(\s+attributable\s+to\s+{_PARENT})?$")
_INCOME_LABEL = re.compile(rf"^(net\s+)?{_EARN}"
                           rf"(\s+\(loss\))?(\s+attributable\s+to\s+{_PARENT})?$")


def _eps_row_under(heading: str, label: str, concept: str) -> bool:
    """A per-share row named by what it divides ("Net income attributable to X common shareholders", "Diluted
    earnings/(loss)") under a heading that says it is per share ("Earnings per common share - diluted:", "Per share
    data applicable to common shareholders"); which per-share amount: the label's own "basic"/"diluted", else the
    heading's."""
    which = re.match(r"(basic|diluted)\s+(.+)$", label)
    divided = which.group(2) if which else label
    if not re.search(_EPS_HEAD, heading, re.I) or not (_INCOME_LABEL.match(divided) or _PER_SHARE.match(divided)):
        return False
    if "continuing" in label:
        return False
    where = which.group(1) if which else heading
    diluted, basic = re.search(r"diluted", where, re.I), re.search(r"basic", where, re.I)
    if concept == "us-gaap:EarningsPerShareDiluted":
        return bool(diluted) and not basic
    if concept == "us-gaap:EarningsPerShareBasic":
        return bool(basic) and not diluted
    return bool(basic and diluted)


def _concept(label: str, heading: str, kind: str) -> Concept | None:
    clean = re.sub(r"\s+", " ", label.replace("’", "'")).strip(" :$").lower()
    clean = re.sub(r"\s*\(\d\)$|\s*\(unaudited\)$", "", clean)
    if kind == "income":  # under a per-share heading, a row named by its numerator is that per-share amount
        per_share = [c for c in CONCEPTS if c.unit == "USD/shares" and _eps_row_under(heading, clean, c.name)]
        if per_share:
            return per_share[0]
    for c in CONCEPTS:
        if c.kind != kind and not (kind == "comprehensive" and c.name == "us-gaap:NetIncomeLoss"):
            continue
        if not c.label.match(clean):
            continue
        # a bare "Diluted": its heading says of what
        if re.fullmatch(r"(basic|diluted|basic\s+(and|&)\s+diluted)[\s($)]*", clean):
            shares = bool(re.search(_SHARES_HEAD, heading, re.I))
            if c.unit == "shares" and not shares or c.unit == "USD/shares" and (
                    shares or not re.search(_EPS_HEAD, heading, re.I)):
                continue
        return c
    return None


def statement_facts(pages: list[str]) -> list[FilingFact]:
    """The facts of the primary statements found in `pages` (1-based page numbers). A concept's value per period is
    taken from the first statement of its kind that states it, consolidated statements before others (a
    comprehensive-income statement repeats net income; it counts only where no income statement was read)."""
    out: dict[tuple[str, int, str], FilingFact] = {}
    cover = _cover(pages)
    # the consolidated statements first: a summarized (guarantor) or parent-only statement of the same period is not
    # the filing's own figure
    for st in sorted(_statements(pages), key=lambda s: (s.kind == "comprehensive",
                                                        "consolidated" not in s.title.lower(), s.page)):
        for f in _facts_of(st, cover):
            # one period: the same end and about the same length (a 53-week year read from a header that names its
            # start, and "For the Year Ended" of a summary that does not, are one year)
            out.setdefault((f.concept, round(period_months(f)), f.period_end or ""), f)
    return list(out.values())
