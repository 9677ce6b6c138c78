"""Cell-level parsing for transaction logs: amounts (decimal comma/point, thousands separators,
currency symbols, trailing minus, parentheses) and dates (format chosen per column, not per cell).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from pipeline.grounding.accounts import valid_iban

CURRENCY_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR", "₽": "RUB", "zł": "PLN", "kč": "CZK",
                    "fr.": "CHF", "chf": "CHF"}
LEGACY_CURRENCIES = {"RUR": "RUB"}  # pre-1998 code still used by Russian bank exports
# The currencies an export may name in a header or preamble word ("Debit CHF"): a short list, so that a three-letter
# word ('out', 'net') is never taken for one.
COMMON_CURRENCIES = frozenset(
    "EUR USD GBP CHF JPY CNY CZK PLN HUF SEK NOK DKK RUB UAH INR AUD CAD NZD SGD HKD ZAR BRL MXN TRY RON BGN HRK "
    "ILS AED SAR KRW TWD THB IDR MYR PHP VND ARS CLP COP PEN ISK".split()
)
_ISO_CURRENCY = re.compile(r"^[A-Z]{3}$")
_AMOUNT_CHARS = re.compile(r"^[+-]?\(?[+-]?(?:[0-9]|[.,][0-9])[0-9.,' \u00a0\u202f]*\)?[+-]?$")  # '-,01' too
_MAX_AMOUNT = Decimal("1e14")
_QUANT = Decimal("0.0001")


def normalise_currency(value: str | None) -> str | None:
    """ISO 4217 code from a cell ('eur', 'RUR', '€'), or None if it is not one."""
    if value is None:
        return None
    v = value.strip()
    if not v:
        return None
    if v.lower() in CURRENCY_SYMBOLS:
        return CURRENCY_SYMBOLS[v.lower()]
    v = v.upper()
    v = LEGACY_CURRENCIES.get(v, v)
    return v if _ISO_CURRENCY.match(v) else None


def iban_currency(account: object) -> str | None:
    """The currency of a valid IBAN's country when it has exactly one today (babel's territory data: NL -> EUR).

    A bank account keeps its country's currency unless the export says otherwise, so this comes after a
    currency column, a symbol and a file-level hint, and before --default-currency."""
    return _iban_currency(str(account or "").replace(" ", "").upper())


@lru_cache(maxsize=4096)
def _iban_currency(iban: str) -> str | None:
    """Cached per IBAN: a log repeats its account on every row."""
    if len(iban) < 15 or not valid_iban(iban):
        return None
    return _territory_currency(iban[:2])


# A BIC after its label ('BIC: ABNANL2A', 'SWIFT code CCBPFRPPBDX'): unlabelled, any eight capitals would pass.
_LABELLED_BIC = re.compile(r"\b(?i:bic|swift)(?i:[ -]?code)?\s*[:;,=]?\s*\b([A-Z]{6}[A-Z0-9]{2}(?:[A-Z0-9]{3})?)\b")


def bic_currency(text: str) -> str | None:
    """The currency of the country of the first labelled, well-formed BIC in `text` (schwifty checks its form and
    country), where that country has one: a statement that names its bank's BIC but no currency or IBAN."""
    # lazy: the BIC registry loads on first use
    from schwifty import BIC
    from schwifty.exceptions import SchwiftyException

    for m in _LABELLED_BIC.finditer(text):
        try:
            country = BIC(m.group(1)).country_code
        except (SchwiftyException, ValueError):
            continue
        return _territory_currency(country)
    return None


def _territory_currency(country: str) -> str | None:
    # lazy: CLDR tables load on first use
    from babel.numbers import get_territory_currencies

    currencies = get_territory_currencies(country, tender=True)
    return currencies[0] if len(currencies) == 1 else None


def strip_currency(raw: str) -> tuple[str, str | None]:
    """Remove a currency symbol or code around an amount; return (rest, ISO code found)."""
    s = raw.strip()
    found = None
    for sym, code in CURRENCY_SYMBOLS.items():
        if sym in ("fr.", "chf", "zł", "kč"):
            continue
        if sym in s:
            s = s.replace(sym, "")
            found = code
    m = re.match(r"^([A-Za-z]{3})\s*(.+)$", s) or re.match(r"^(.+?)\s*([A-Za-z]{3})$", s)
    if m:
        code_part = m.group(1) if m.group(1).isalpha() else m.group(2)
        iso = normalise_currency(code_part)
        if iso:
            found = iso
            s = (m.group(2) if m.group(1).isalpha() else m.group(1)).strip()
    return s.strip(), found


def detect_decimal_comma(samples: list[str], default: bool = False) -> bool:
    """Decide, for a whole column, whether ',' is the decimal separator.

    Evidence per cell: the last separator followed by 1-2 digits is the decimal one; '1.234.567' or
    '1,234' with exactly three digits after is a thousands group. Ties fall back to `default`.
    """
    comma = point = 0
    for raw in samples:
        s, _ = strip_currency(raw)
        s = s.replace(" ", "").replace("\u00a0", "").replace("'", "")
        last_c, last_p = s.rfind(","), s.rfind(".")
        if last_c >= 0 and last_p >= 0:
            if last_c > last_p:
                comma += 1
            else:
                point += 1
        elif last_c >= 0:
            tail = s[last_c + 1:].rstrip(")-+")
            if len(tail) != 3 or s.count(",") == 1 and not s.lstrip("-+(").split(",")[0]:
                comma += 1
            elif s.count(",") > 1:
                point += 1
        elif last_p >= 0:
            tail = s[last_p + 1:].rstrip(")-+")
            if s.count(".") > 1:
                comma += 1
            elif len(tail) != 3:
                point += 1
    if comma == point:
        return default
    return comma > point


def value_decimal_comma(s: str, hint: bool) -> bool:
    """Whether ',' is this value's decimal mark. The value decides where it can: with both marks the last one is
    the decimal mark; a mark that repeats groups thousands; a single mark not followed by exactly three digits is
    decimal. Only a lone mark before three digits ("1,234", "1.234") is ambiguous and takes `hint` (the column's
    or file's locale). Written here because no parsing library infers the mark per value: babel and
    price-parser both need the locale up front."""
    last_c, last_p = s.rfind(","), s.rfind(".")
    if last_c >= 0 and last_p >= 0:
        return last_c > last_p
    if last_c < 0 and last_p < 0:
        return hint
    mark = "," if last_c >= 0 else "."
    if s.count(mark) > 1:
        return mark == "."
    digits_after = len(s) - max(last_c, last_p) - 1
    if digits_after != 3:
        return mark == ","
    return hint


def parse_amount(raw: str | None, decimal_comma: bool) -> tuple[Decimal | None, str | None]:
    """Parse one amount cell into (Decimal rounded to 4 places, currency found in the cell). `decimal_comma` is
    the column's decimal mark, used only where the value itself is ambiguous (`value_decimal_comma`).

    Returns (None, None) for an empty cell; raises ValueError with a reason for an unparseable one.
    """
    if raw is None:
        return None, None
    s, cur = strip_currency(str(raw))
    s = s.replace("\u00a0", "").replace("\u202f", "").replace(" ", "").replace("'", "")
    if not s or s in ("-", "--"):
        return None, cur
    if not _AMOUNT_CHARS.match(s):
        raise ValueError(f"not an amount: {raw!r}")
    negative = False
    if s.startswith("(") and s.endswith(")"):
        negative, s = True, s[1:-1]
    if s.endswith("-"):
        negative, s = True, s[:-1]
    elif s.endswith("+"):
        s = s[:-1]
    if s.startswith("-"):
        negative, s = not negative, s[1:]
    elif s.startswith("+"):
        s = s[1:]
    if value_decimal_comma(s, decimal_comma):
        s = s.replace(".", "").replace(",", ".")
    else:
        s = s.replace(",", "")
    if s.count(".") > 1 or not s or s == ".":
        raise ValueError(f"not an amount: {raw!r}")
    try:
        value = Decimal(s)
    except InvalidOperation as exc:
        raise ValueError(f"not an amount: {raw!r}") from exc
    if abs(value) >= _MAX_AMOUNT:
        raise ValueError(f"amount out of range: {raw!r}")
    value = value.quantize(_QUANT)
    return (-value if negative else value), cur


# Candidate date formats, most specific first. Day-first and month-first slash/dot formats are both
# tried; the column decides (see choose_date_format).
DATE_FORMATS: tuple[str, ...] = (
    "%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S %z", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%Y/%m/%d", "%Y.%m.%d",
    "%d.%m.%Y %H:%M:%S", "%d.%m.%Y %H:%M", "%d.%m.%Y", "%d.%m.%y",
    "%d/%m/%Y %H:%M:%S", "%d/%m/%Y %H:%M", "%d/%m/%Y", "%d/%m/%y",
    "%m/%d/%Y %H:%M:%S", "%m/%d/%Y %I:%M:%S %p", "%m/%d/%Y %H:%M", "%m/%d/%Y", "%m/%d/%y",
    "%d-%m-%Y", "%d-%m-%y", "%m-%d-%Y", "%Y%m%d", "%d %b %Y", "%d %B %Y", "%b %d, %Y", "%B %d, %Y",
    "%d-%b-%Y", "%d-%b-%y", "%d %b %y",
)
_MONTH_FIRST = {"%m/%d/%Y", "%m/%d/%y", "%m/%d/%Y %H:%M:%S", "%m/%d/%Y %I:%M:%S %p", "%m/%d/%Y %H:%M", "%m-%d-%Y"}
_DOT_PARTS = re.compile(r"(?<=\d)\.\s+(?=\d)")
_LEADING_DATE = re.compile(r"^\s*(\S+(?:\s\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:\s?[AP]M)?)?)")


def _clean_date(raw: str) -> str:
    s = raw.strip().strip("'\"")
    # "04/17/2023 as of 04/15/2023" (brokerage exports): keep the leading date
    if " as of " in s:
        s = s.split(" as of ", 1)[0].strip()
    if s.endswith("Z"):
        s = s[:-1] + "+0000"
    # "2019. 04. 19." (Hungarian, CLDR's y. MM. dd.) and "19.04.2019.": a dot ends each part, the last one too
    s = _DOT_PARTS.sub(".", s)
    return s[:-1] if len(s) > 1 and s.endswith(".") and s[-2].isdigit() else s


# A column of dates printed with a month name in a language strptime does not read ('25. März 2020', '3 févr.
# 2021'): parsed by dateparser (`pipeline.grounding.dates`), tried only where the cells have that shape.
MONTH_NAME_FORMAT = "month name"
_MONTH_NAME_SHAPE = re.compile(r"^\s*(\d{1,2}\.?\s*[^\W\d_]{3,}\.?,?\s*\d{2,4}"  # 25. März 2020
                               r"|[^\W\d_]{3,}\.?\s+\d{1,2}\.?,?\s+\d{4})\s*$")  # Sept. 9, 2014
_MONTH_NAME_SAMPLE = 200


def _month_name_date(raw: str) -> datetime:
    # lazy: dateparser's language data loads only for such a column
    from pipeline.grounding.dates import parse_month_name_date

    s = _clean_date(raw)
    iso = parse_month_name_date(s) if _MONTH_NAME_SHAPE.match(s) else None
    if iso is None:
        raise ValueError(f"not a date with a month name: {raw!r}")
    return datetime.fromisoformat(iso).replace(tzinfo=timezone.utc)


def parse_date(raw: str, fmt: str) -> datetime:
    """Parse with a fixed format; naive values are taken as UTC. Raises ValueError."""
    if fmt == MONTH_NAME_FORMAT:
        dt = _month_name_date(raw)
        if not 1900 <= dt.year <= 2100:
            raise ValueError(f"date out of range: {raw!r}")
        return dt
    s = _clean_date(raw)
    if fmt.endswith(".") and not s.endswith("."):  # a format written with the trailing dot the cleaning drops
        fmt = fmt[:-1]
    if fmt == "%Y%m%d" and not (len(s) == 8 and s.isdigit()):
        raise ValueError(f"not a yyyymmdd date: {raw!r}")
    dt = datetime.strptime(s, fmt)
    if not 1900 <= dt.year <= 2100:
        raise ValueError(f"date out of range: {raw!r}")
    if dt.tzinfo is None:
        return dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


_FORMAT_SAMPLE = 2000


def _parsed_count(values: list[str], fmt: str) -> int:
    ok = 0
    for v in values:
        try:
            parse_date(v, fmt)
            ok += 1
        except ValueError:
            pass
    return ok


def choose_date_format(samples: list[str], prefer_month_first: bool = False, min_share: float = 0.8) -> str | None:
    """The format that parses the most non-empty samples (at least `min_share` of them).

    Day-first vs month-first: whichever parses more wins; when both parse everything (all days
    <= 12) the column is ambiguous and day-first is used unless `prefer_month_first` (USD exports).
    Long columns are scored on an evenly spread sample first; the formats that lead there are then
    counted on the whole column, so a late "13/01" still decides day-first (and a million-row log
    is not parsed 35 times).
    """
    values = [v for v in samples if v and v.strip()]
    if not values:
        return None
    step = max(1, len(values) // _FORMAT_SAMPLE)
    sample = values[::step]
    scored = [(_parsed_count(sample, fmt), fmt) for fmt in DATE_FORMATS]
    top = max(ok for ok, _ in scored)
    if top == 0:
        return _month_name_format(values, min_share)
    leaders = [fmt for ok, fmt in scored if ok >= top * 0.98]
    if step > 1:
        counts = {fmt: _parsed_count(values, fmt) for fmt in leaders}
    else:
        counts = {fmt: ok for ok, fmt in scored if fmt in leaders}
    best: tuple[int, int, str] | None = None
    for fmt in DATE_FORMATS:  # most specific first; ties keep the earlier format
        if fmt not in counts:
            continue
        tie_rank = 1 if (fmt in _MONTH_FIRST) == prefer_month_first else 0
        if best is None or (counts[fmt], tie_rank) > (best[0], best[1]):
            best = (counts[fmt], tie_rank, fmt)
    if best is None or best[0] < min_share * len(values):
        return _month_name_format(values, min_share)
    return best[2]


def _month_name_format(values: list[str], min_share: float) -> str | None:
    """MONTH_NAME_FORMAT where that many of a column's cells have a month-name date's shape and parse as one."""
    shaped = [v for v in values if _MONTH_NAME_SHAPE.match(_clean_date(v))]
    if len(shaped) < min_share * len(values):
        return None
    sample = values[:: max(1, len(values) // _MONTH_NAME_SAMPLE)]
    return MONTH_NAME_FORMAT if _parsed_count(sample, MONTH_NAME_FORMAT) >= min_share * len(sample) else None
