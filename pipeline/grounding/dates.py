"""Dates a document prints, as ISO strings.

Numeric forms (ISO, y/m/d, d.m.y, d/m/y and m/d/y) are read with regular expressions: they are unambiguous or
kept in both readings. Month names in the languages of European invoices ("29 maart 2014", "7. Mai 2014",
"02 Juillet 2015", "3 de marzo de 2024", "August 3 , 2014") are located by a loose pattern and parsed by
`dateparser`, which knows the month names and abbreviations of each language; it also rejects words that are not
months, so the pattern may be generous.
"""

from __future__ import annotations

import re
from datetime import date
from functools import lru_cache
from typing import Any

from pipeline.grounding._common import in_order

LANGUAGES = ("en", "de", "fr", "nl", "es", "it", "pt")

_NUMERIC_DATES = (
    re.compile(r"(?<!\d)(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})(?!\d)"),
    re.compile(r"(?<!\d)(?P<y>\d{4})[/.](?P<m>\d{1,2})[/.](?P<d>\d{1,2})(?!\d|[/.]\d)"),
    re.compile(r"(?<![\d.])(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{4})(?!\d|\.\d)"),
)
# d/m/y or m/d/y (also with dashes): ambiguous on its own, so both readings that are real dates are kept.
_SLASH_DATE = re.compile(r"(?<![\d/-])(?P<a>\d{1,2})(?P<sep>[/-])(?P<b>\d{1,2})(?P=sep)(?P<y>\d{4})(?!\d)")

_WORD = r"[^\W\d_]{3,12}\.?"
_DAY = r"\d{1,2}(?:st|nd|rd|th|er|e|\u00ba|\u00b0)?\.?"
_MONTH_NAME_DATES = (
    # 29 maart 2014, 7. Mai 2014, 1er janvier 2020, 3 de marzo de 2024, 12-Sep-2023
    re.compile(rf"(?<![\w.])(?P<s>{_DAY}[ \-]*(?:de )?{_WORD}[ \-,]*(?:de )?\d{{4}})(?!\d)", re.I),
    # August 3 , 2014; March 5th, 2024
    re.compile(rf"(?<![\w])(?P<s>{_WORD} {_DAY} ?,? ?\d{{4}})(?!\d)", re.I),
)


def _iso(y: int, m: int, d: int) -> str | None:
    try:
        return date(y, m, d).isoformat()
    except ValueError:
        return None


@lru_cache(maxsize=1)
def _parser() -> Any:
    from dateparser.date import DateDataParser

    return DateDataParser(languages=list(LANGUAGES), settings={
        "STRICT_PARSING": True, "REQUIRE_PARTS": ["day", "month", "year"], "PREFER_LOCALE_DATE_ORDER": False,
        "DATE_ORDER": "DMY"})


@lru_cache(maxsize=4096)
def parse_month_name_date(s: str) -> str | None:
    """ISO form of one printed date with a month name, or None when the word is not a month in LANGUAGES."""
    if not re.search(r"[^\W\d_]{3}", s):
        return None
    data = _parser().get_date_data(" ".join(s.replace(",", " , ").split()))
    return data.date_obj.date().isoformat() if data and data.date_obj else None


def date_candidates(text: str) -> list[str]:
    """ISO form of every date the text prints, in document order."""
    found: list[tuple[int, str]] = []
    for rx in _NUMERIC_DATES:
        for m in rx.finditer(text):
            iso = _iso(int(m["y"]), int(m["m"]), int(m["d"]))
            if iso:
                found.append((m.start(), iso))
    for m in _SLASH_DATE.finditer(text):
        a, b, y = int(m["a"]), int(m["b"]), int(m["y"])
        for iso in (_iso(y, b, a), _iso(y, a, b)):
            if iso:
                found.append((m.start(), iso))
    for rx in _MONTH_NAME_DATES:
        for m in rx.finditer(text):
            iso = parse_month_name_date(m["s"])
            if iso:
                found.append((m.start(), iso))
    return in_order(found)
