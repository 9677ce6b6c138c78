"""Dates a document prints, as ISO strings, with where each is printed.

Numeric forms (ISO, y/m/d, d.m.y, d/m/y and m/d/y, two- or four-digit years) are read with regular expressions.
A slash or dash date whose day and month could be swapped is read in the document's order: the one its own
unambiguous dates show (a first number over 12 means day first), else the order of its country's short date
format (`pipeline.grounding.locale`, CLDR through babel), else both readings are kept and the model chooses.
Month names in the languages of European invoices ("29 maart 2014", "7. Mai 2014", "02 Juillet 2015", "3 de marzo
de 2024", "August 3 , 2014", "27-Feb-19") are located by a loose pattern and parsed by `dateparser`, which knows the
month names and abbreviations of each language; it also rejects words that are not months, so the pattern may be
generous.
"""

from __future__ import annotations

import re
from datetime import date
from functools import lru_cache
from typing import Any

from pipeline.grounding._common import in_order
from pipeline.grounding.locale import DMY, MDY, country_date_order

LANGUAGES = ("en", "de", "fr", "nl", "es", "it", "pt", "ms")
TWO_DIGIT_PIVOT = 69  # two-digit years 00-68 are 2000-2068, 69-99 are 1969-1999 (POSIX strptime's rule)

# A four-digit year may run straight into the time printed after it: OCR of a receipt drops the space
# ("10-03-201823:03:06").
_TIME_AFTER_YEAR = r"(?<=\d{4})(?=\d{1,2}:\d{2}(?!\d))"
# ... and year first, into the two-digit day ("2018/02/2213:34:14").
_TIME_AFTER_DAY = r"(?<=\d{2})(?=\d{1,2}:\d{2}(?!\d))"
_NUMERIC_DATES = (
    re.compile(rf"(?<![\d/.-])(?P<y>\d{{4}})-(?P<m>\d{{1,2}})-(?P<d>\d{{1,2}})(?:{_TIME_AFTER_DAY}|(?![\d]))"),
    re.compile(rf"(?<![\d/.-])(?P<y>\d{{4}})[/.](?P<m>\d{{1,2}})[/.](?P<d>\d{{1,2}})"
               rf"(?:{_TIME_AFTER_DAY}|(?!\d|[/.]\d))"),
    re.compile(rf"(?<![\d.])(?P<d>\d{{1,2}})\.(?P<m>\d{{1,2}})\.(?P<y>\d{{4}}|\d{{2}})(?:{_TIME_AFTER_YEAR}|(?!\d|\.\d))"),
)
# d/m/y or m/d/y (also with dashes): ambiguous on its own; read in the document's order. OCR of thermal paper
# spaces the separators out and drops the second one before a four-digit year ("05- 03 2018").
_SLASH_DATE = re.compile(r"(?<![\d/.-])(?P<a>\d{1,2}) ?(?P<sep>[/-]) ?(?P<b>\d{1,2}) ?"
                         r"(?:(?P=sep) ?(?P<y>\d{4}|\d{2})|(?P<y4>(?:19|20)\d{2}))"
                         rf"(?:{_TIME_AFTER_YEAR}|(?![\d/]|-\d))")

_WORD = r"[^\W\d_]{3,12}\.?"
_DAY = r"\d{1,2}(?:st|nd|rd|th|er|e|\u00ba|\u00b0)?\.?"
_MONTH_NAME_DATES = (
    # 29 maart 2014, 7. Mai 2014, 1er janvier 2020, 3 de marzo de 2024, 12-Sep-2023, 27-Feb-19, 12JAN2019
    # (matched at every start, as a lookahead: "10:22 and 27-Feb-19" must not hide the date behind "22 and 27")
    re.compile(rf"(?<![\w.])(?=(?P<s>{_DAY}[ \-/]*(?:de )?{_WORD}[ \-,/]*(?:de )?(?:\d{{4}}|\d{{2}}))(?!\d))", re.I),
    # August 3 , 2014; March 5th, 2024
    re.compile(rf"(?<![\w])(?P<s>{_WORD} {_DAY} ?,? ?\d{{4}})(?!\d)", re.I),
)


def _year(y: str) -> int:
    n = int(y)
    if len(y) == 2:
        return 2000 + n if n < TWO_DIGIT_PIVOT else 1900 + n
    return n


def _iso(y: int, m: int, d: int) -> str | None:
    try:
        return date(y, m, d).isoformat()
    except ValueError:
        return None


@lru_cache(maxsize=1)
def _parser() -> Any:
    # lazy: its language data loads on first use
    from dateparser.date import DateDataParser

    return DateDataParser(languages=list(LANGUAGES), settings={
        "STRICT_PARSING": True, "REQUIRE_PARTS": ["day", "month", "year"], "PREFER_LOCALE_DATE_ORDER": False,
        "DATE_ORDER": "DMY"})


@lru_cache(maxsize=4096)
def parse_month_name_date(s: str) -> str | None:
    """ISO form of one printed date with a month name, or None when the word is not a month in LANGUAGES."""
    if not re.search(r"[^\W\d_]{3}", s):
        return None
    s = re.sub(r"(?<=\d)(?=[^\W\d_])|(?<=[^\W\d_])(?=\d)", " ", s)  # "12JAN2019" -> "12 JAN 2019"
    s = re.sub(r"(?<=[^\W\d_])[-/](?=\d)|(?<=\d)[-/](?=[^\W\d_])", " ", s)  # "27-Feb-19" -> "27 Feb 19"
    data = _parser().get_date_data(" ".join(s.replace(",", " , ").split()))
    if not (data and data.date_obj):
        return None
    year = re.search(r"(\d{2,4})\s*$", s)
    if year and len(year.group(1)) == 2:  # dateparser's own two-digit rule differs from the pivot above
        return _iso(_year(year.group(1)), data.date_obj.month, data.date_obj.day)
    return data.date_obj.date().isoformat()


def slash_order(text: str) -> str | None:
    """DMY or MDY when the text's own slash/dash dates settle it (a first number over 12 is a day, a second over 12
    is a day), None when none does or they disagree."""
    seen = set()
    for m in _SLASH_DATE.finditer(text):
        a, b = int(m["a"]), int(m["b"])
        if a > 12 >= b >= 1:
            seen.add(DMY)
        elif b > 12 >= a >= 1:
            seen.add(MDY)
    return seen.pop() if len(seen) == 1 else None


def date_spans(text: str, order: str | None = None) -> list[tuple[int, int, str]]:
    """(start, end, ISO date) of every date the text prints. `order` (DMY or MDY) reads ambiguous slash dates;
    None keeps both readings."""
    found: list[tuple[int, int, str]] = []
    for rx in _NUMERIC_DATES:
        for m in rx.finditer(text):
            iso = _iso(_year(m["y"]), int(m["m"]), int(m["d"]))
            if iso:
                found.append((m.start(), m.end(), iso))
    for m in _SLASH_DATE.finditer(text):
        a, b, y = int(m["a"]), int(m["b"]), _year(m["y"] or m["y4"])
        readings = {DMY: _iso(y, b, a), MDY: _iso(y, a, b)}
        if order in readings and readings[order]:
            chosen = [readings[order]]
        elif order in readings:  # impossible in the document's order: not a date of this document
            chosen = []
        else:
            chosen = [r for r in (readings[DMY], readings[MDY]) if r]
        found.extend((m.start(), m.end(), iso) for iso in dict.fromkeys(chosen) if iso)
    for rx in _MONTH_NAME_DATES:
        for m in rx.finditer(text):
            iso = parse_month_name_date(m["s"])
            if iso:
                found.append((m.start("s"), m.end("s"), iso))
    found.sort()
    return found


def document_date_order(text: str, country: str | None) -> str | None:
    """The order ambiguous slash dates of this document follow: its own evidence first, then its country's."""

    own = slash_order(text)
    if own:
        return own
    order = country_date_order(country) if country else None
    return order if order in (DMY, MDY) else None


def date_candidates(text: str, order: str | None = None) -> list[str]:
    """ISO form of every date the text prints, in document order."""
    return in_order([(start, iso) for start, _, iso in date_spans(text, order)])
