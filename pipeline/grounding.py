"""Grounded extraction: a date, amount or account the model emits must be one the document prints.

A small model copies long digit runs imperfectly (an IBAN drifts into repeated digits, an amount
borrows digits from a nearby reference). Those are hallucinations no schema pattern can catch, and
in a financial pipeline a plausible-looking wrong IBAN is worse than a null. So, per document,
the pipeline scans the prompt's text for every value of these kinds that it prints, rewrites each
to the canonical form the schema asks for (ISO date, plain decimal, IBAN without spaces), and
narrows the field's decoding schema to that list (an `enum`). The model still decides which value
is the right one — the constraint only rules out values the document never states. A field with
no candidate in the text keeps its plain pattern, so nothing the model could say before is lost
on documents the scanner does not understand.

The engine stays unaware of this: it receives an ordinary JSON schema per request.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from datetime import date
from typing import Any

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
_MONTH_NAME = r"(?P<mon>(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?)"
_DATE_RES = (
    re.compile(r"(?<!\d)(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})(?!\d)"),
    re.compile(r"(?<!\d)(?P<y>\d{4})[/.](?P<m>\d{1,2})[/.](?P<d>\d{1,2})(?!\d|[/.]\d)"),
    re.compile(r"(?<![\d.])(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<y>\d{4})(?!\d|\.\d)"),
    re.compile(rf"(?<!\d)(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\.?[ -]{_MONTH_NAME}[ -,]*(?P<y>\d{{4}})(?!\d)", re.I),
    re.compile(rf"\b{_MONTH_NAME} (?P<d>\d{{1,2}})(?:st|nd|rd|th)?,? (?P<y>\d{{4}})(?!\d)", re.I),
)
# d/m/y or m/d/y (also with dashes): ambiguous on its own, so both readings that are real dates are kept.
_SLASH_DATE = re.compile(r"(?<![\d/-])(?P<a>\d{1,2})(?P<sep>[/-])(?P<b>\d{1,2})(?P=sep)(?P<y>\d{4})(?!\d)")

# An amount with exactly two decimals; thousands grouped by one separator that differs from the
# decimal mark. Matched at every start position (lookahead) so "12 345,67" also yields "345,67".
_AMOUNT = re.compile(
    r"(?=(?<![\w.,\-\u2212])(?P<sign>[-\u2212] ?)?(?P<int>\d{1,3}(?:(?P<grp>[,. \u00a0'])\d{3})(?:(?P=grp)\d{3})*|\d+)"
    r"(?P<dec>[.,])(?P<frac>\d{2})(?!\d|[.,]\d))"
)
# Grouped IBANs may wrap onto the next line in extracted PDF text; both readings are kept.
# A whole amount without decimals counts only next to a currency code or symbol ("EUR 1,200", "$950").
_CCY = r"(?:\b[A-Z]{3}|[$\u20ac\u00a3\u00a5])"
_WHOLE = r"(?P<sign>[-\u2212] ?)?(?P<int>\d{1,3}(?:(?P<grp>[,. \u00a0'])\d{3})(?:(?P=grp)\d{3})*|\d+)(?![\d]|[.,]\d)"
_WHOLE_AMOUNT = (re.compile(rf"{_CCY} ?{_WHOLE}"), re.compile(rf"(?<![\w.,\-\u2212]){_WHOLE} ?{_CCY}\b"))
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ \n]?[A-Z0-9]{4}){2,7}(?:[ \n]?[A-Z0-9]{1,4})?\b")
_ACCOUNT_TOKEN = re.compile(r"(?<![\w/-])[A-Z0-9][A-Z0-9-]{3,33}(?![\w/-])")


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _iso(y: int, m: int, d: int) -> str | None:
    try:
        return date(y, m, d).isoformat()
    except ValueError:
        return None


def _month(name: str) -> int | None:
    """1-12 for an English month name or abbreviation ("Mar", "Sept.", "march")."""
    key = name.lower().rstrip(".")
    return next((i for i, full in enumerate(MONTHS, start=1) if len(key) >= 3 and full.startswith(key)), None)


def date_candidates(text: str) -> list[str]:
    """ISO form of every date the text prints (ISO, y/m/d, d.m.y, "5 Mar 2024", "March 5, 2024", d/m/y, d-m-y)."""
    found: list[tuple[int, str]] = []
    for rx in _DATE_RES:
        for m in rx.finditer(text):
            g = m.groupdict()
            month = _month(g["mon"]) if g.get("mon") else int(g["m"])
            iso = _iso(int(g["y"]), month, int(g["d"])) if month else None
            if iso:
                found.append((m.start(), iso))
    for m in _SLASH_DATE.finditer(text):
        a, b, y = int(m["a"]), int(m["b"]), int(m["y"])
        for iso in (_iso(y, b, a), _iso(y, a, b)):
            if iso:
                found.append((m.start(), iso))
    return _unique(iso for _, iso in sorted(found, key=lambda t: t[0]))


def _plain(sign: str | None, whole: str, frac: str) -> str:
    return f"{'-' if sign else ''}{int(re.sub(r'[^0-9]', '', whole))}.{frac}"


def amount_candidates(text: str) -> list[str]:
    """Plain-decimal form ("-1234.50") of every amount the text prints, whatever its locale: any number with two
    decimals, and whole numbers printed next to a currency ("EUR 1.200" -> "1200.00")."""
    found: list[tuple[int, str]] = []
    for m in _AMOUNT.finditer(text):
        grp, dec = m["grp"], m["dec"]
        if grp and grp in ".," and grp == dec:
            continue  # "1.234.56" is not an amount
        found.append((m.start(), _plain(m["sign"], m["int"], m["frac"])))
    for rx in _WHOLE_AMOUNT:
        found.extend((m.start("int"), _plain(m["sign"], m["int"], "00")) for m in rx.finditer(text))
    return _unique(value for _, value in sorted(found, key=lambda t: t[0]))


def account_candidates(text: str) -> list[str]:
    """IBANs (printed grouped or compact) without spaces, plus every account-like token (five digits or more)
    printed verbatim."""
    ibans = []
    for m in _IBAN.finditer(text):
        ibans.append(re.sub(r"\s", "", m.group(0)))
        if "\n" in m.group(0):
            ibans.append(m.group(0).split("\n")[0].replace(" ", ""))
    tokens = [t for t in _ACCOUNT_TOKEN.findall(text) if sum(c.isdigit() for c in t) >= 5]
    return _unique(ibans + tokens)


CANDIDATE_FIELDS = {"date": date_candidates, "amount": amount_candidates, "account": account_candidates}
"""Document fields whose decoding is narrowed to values found in the text, and their scanners."""


def document_candidates(text: str) -> dict[str, list[str]]:
    return {name: scan(text) for name, scan in CANDIDATE_FIELDS.items()}


# Most values one field's enum may list. A long statement can hold thousands of amounts; every enum value becomes
# grammar the matcher walks at each step and schema compilation grows with it, so one document could stall its
# whole bucket. Past the cap the enum keeps the first and the last values in document order (dates and parties
# sit near the top, totals near the bottom).
MAX_ENUM_VALUES = 64


def _capped(values: list[str]) -> list[str]:
    if len(values) <= MAX_ENUM_VALUES:
        return values
    head = MAX_ENUM_VALUES // 2
    return values[:head] + values[len(values) - (MAX_ENUM_VALUES - head) :]


def _narrow(prop: dict[str, Any], values: list[str]) -> dict[str, Any]:
    """`prop` with its string branch replaced by an enum of (at most MAX_ENUM_VALUES of) the values its pattern
    accepts."""
    branches = prop["anyOf"] if "anyOf" in prop else [prop]
    out = []
    for branch in branches:
        if branch.get("type") == "string" and "enum" not in branch:
            pattern = branch.get("pattern")
            kept = [v for v in values if pattern is None or re.search(pattern, v)]
            lo, hi = branch.get("minLength", 0), branch.get("maxLength", 10**9)
            kept = [v for v in kept if lo <= len(v) <= hi]
            if not kept:
                return prop
            branch = {"type": "string", "enum": _capped(kept)}
        out.append(branch)
    return {"anyOf": out} if "anyOf" in prop else out[0]


def grounded_schema(schema: dict[str, Any], candidates: dict[str, list[str]]) -> dict[str, Any]:
    """Copy of a decoding schema whose candidate fields only admit the given values (or null where allowed)."""
    out = copy.deepcopy(schema)
    for name, values in candidates.items():
        if name in out["properties"] and values:
            out["properties"][name] = _narrow(out["properties"][name], values)
    return out


# Currency symbols that name one currency in the documents this pipeline reads; "$" alone is read as USD (a CAD or
# AUD document prints its code beside it, which is found as well).
_CURRENCY_SYMBOLS = {"\u20ac": "EUR", "\u00a3": "GBP", "$": "USD", "\u20b9": "INR", "Rs": "INR", "Rs.": "INR",
                     "\u00a5": "JPY", "Fr.": "CHF", "z\u0142": "PLN", "K\u010d": "CZK", "\u20bd": "RUB"}
_SYMBOL_RE = re.compile("|".join(re.escape(s) for s in sorted(_CURRENCY_SYMBOLS, key=len, reverse=True)))
_CODE_RE = re.compile(r"(?<![A-Za-z])[A-Z]{3}(?![A-Za-z])")


def _iso_currencies() -> frozenset[str]:
    from babel.numbers import list_currencies

    return frozenset(list_currencies())


def currency_candidates(text: str) -> list[str]:
    """ISO 4217 codes the text prints (as codes, or as a symbol that names one currency), in document order."""
    codes = _iso_currencies()
    found = [(m.start(), m.group(0)) for m in _CODE_RE.finditer(text) if m.group(0) in codes]
    found += [(m.start(), _CURRENCY_SYMBOLS[m.group(0)]) for m in _SYMBOL_RE.finditer(text)]
    return _unique(code for _, code in sorted(found))


def _squash(s: str) -> str:
    return " ".join(s.split()).casefold()


SPAN_FIELDS = ("issuer", "counterparty", "reference")
"""Document fields whose value must be a verbatim span of the text (up to whitespace and case)."""


def is_grounded(fields: dict[str, Any], text: str) -> bool:
    """Whether every value an extraction holds is one the document states: names and numbers as spans of its
    text, dates, amounts, accounts and currencies among the values its scanners find."""
    squashed = _squash(text)
    for name in SPAN_FIELDS:
        value = fields.get(name)
        if value is not None and _squash(str(value)) not in squashed:
            return False
    scanners = {**CANDIDATE_FIELDS, "currency": currency_candidates}
    for name, scan in scanners.items():
        value = fields.get(name)
        if value is not None and value not in scan(text):
            return False
    return True
