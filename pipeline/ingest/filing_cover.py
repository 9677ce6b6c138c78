"""What a filing's cover page states: the form, the registrant, the period it reports on, the file number.

    read_cover(text, form_hint=None) -> FilingCover | None   (None: not a filing)

SEC forms print a fixed cover: "FORM 10-Q", "For the Quarterly Period Ended September 30, 2023", "Commission File
Number 001-37845", the registrant's name above "(Exact name of registrant as specified in its charter)" (or, where a
filing drops that caption, the line after the file number). A prospectus says "Filed pursuant to Rule 424(b)(4)"
and "Registration No."; an IFRS annual report says "Annual Report" and "International Financial Reporting
Standards". Every value is copied from the place the cover labels it; a value the cover does not label stays None.
`form_hint` is the form an EDGAR submission's header names (its `<TYPE>`), which wins when present.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

COVER_VERSION = "cover-1"
FORM_TYPES = ("10-K", "10-Q", "8-K", "prospectus", "annual_report", "other")

COVER_CHARS = 6000  # the cover is the first page or two
_FORM = re.compile(r"^\s*form\s+(10-k|10-q|8-k|20-f|40-f|s-1|f-1)\b", re.I | re.M)
_HINT_FORMS = {"10-K": "10-K", "10-K405": "10-K", "10-KT": "10-K", "10-Q": "10-Q", "10-QT": "10-Q", "8-K": "8-K",
               "20-F": "annual_report", "40-F": "annual_report", "S-1": "prospectus", "F-1": "prospectus"}
_PERIOD = re.compile(r"for\s+the\s+(?:fiscal\s+)?(year|quarterly\s+period|quarter|period)\s+ended:?\s+"
                     r"([A-Z][a-z]+\.?\s+\d{1,2},\s*\d{4})", re.I)
_EVENT = re.compile(r"date\s+of\s+report\s*\(date\s+of\s+earliest\s+event\s+reported\)\s*:?\s*"
                    r"([A-Z][a-z]+\.?\s+\d{1,2},\s*\d{4})|([A-Z][a-z]+\.?\s+\d{1,2},\s*\d{4})\s*\n?\s*\(?date\s+of\s+"
                    r"report", re.I)
_FILE_NUMBER = re.compile(r"(?:commission\s+file\s+(?:number|no\.?)|registration\s+no\.?)\s*:?\s*((?:\d{1,3}-)?\d{3,}"
                          r"(?:-\d+)?)", re.I)
_REGISTRANT = re.compile(r"^(.{2,120}?)\s*\n\s*\(?exact\s+name\s+of\s+(?:the\s+)?registrant", re.I | re.M)
_OFFERING_BY = re.compile(r"offering\s+of\s+(?:shares\s+of\s+)?(?:our\s+)?[\w\s]{0,40}?\bby\s+([A-Z][\w.,&' -]{2,80}?"
                          r"(?:Inc|Corporation|Corp|Company|Co|Ltd|LLC|plc|N\.V|S\.A|AG|SE)\b\.?)")


@dataclass(frozen=True)
class FilingCover:
    form_type: str  # one of FORM_TYPES
    registrant: str | None
    period_end: str | None  # ISO date the filing reports on (a report's period; an 8-K's event date)
    file_number: str | None  # Commission File Number, or a prospectus's Registration No.


def _iso(text: str) -> str | None:
    clean = re.sub(r"\s+", " ", text.replace(".", "")).strip()
    for fmt in ("%B %d, %Y", "%b %d, %Y", "%B %d,%Y", "%b %d,%Y"):
        try:
            return dt.datetime.strptime(clean, fmt).date().isoformat()
        except ValueError:
            continue
    return None


def _form(cover: str, text: str, hint: str | None) -> str | None:
    if hint:
        h = hint.strip().upper()
        if h in _HINT_FORMS:
            return _HINT_FORMS[h]
        if h.startswith("424B"):
            return "prospectus"
    m = _FORM.search(cover)
    if m:
        return _HINT_FORMS[m.group(1).upper()]
    if re.search(r"filed\s+pursuant\s+to\s+rule\s+424\s*\(b\)", cover, re.I):
        return "prospectus"
    if re.search(r"\bannual\s+report\b", cover, re.I) and re.search(r"international\s+financial\s+reporting\s+"
                                                                    r"standards|\bIFRS\b", text):
        return "annual_report"
    return None


def read_cover(text: str, form_hint: str | None = None) -> FilingCover | None:
    """The cover's statements, or None when the document is not a filing of a known form."""
    cover = text[:COVER_CHARS]
    form = _form(cover, text, form_hint)
    if form is None:
        return None
    period = _PERIOD.search(cover)
    period_end = _iso(period.group(2)) if period else None
    if form == "8-K" and period_end is None:
        event = _EVENT.search(cover)
        period_end = _iso(event.group(1) or event.group(2)) if event else None
    number = _FILE_NUMBER.search(cover)
    registrant = None
    m = _REGISTRANT.search(cover)
    if m:
        registrant = m.group(1).strip(" |")
    elif number is not None and form != "prospectus":  # the name printed right after the file number
        after = cover[number.end():].lstrip(" \t").split("\n", 2)
        line = after[1].strip(" |") if len(after) > 1 else ""
        registrant = line if re.fullmatch(r"[A-Z0-9][A-Z0-9.,&' -]{2,80}", line) and not re.search(r"\d{3}", line) \
            else None
    elif form == "prospectus":
        by = _OFFERING_BY.search(cover)
        registrant = re.sub(r"(?<=[a-z]{4})\.$", "", by.group(1).strip()) if by else None  # "Corporation." ends
        # the sentence; "Inc." keeps its point
    return FilingCover(form_type=form, registrant=registrant or None, period_end=period_end,
                       file_number=number.group(1) if number else None)
