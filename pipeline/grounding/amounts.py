"""Amounts a document prints, as plain decimals, and the currencies it names, as ISO 4217 codes.

Amounts are scanned by hand: `price-parser` and babel's `parse_decimal` read one number whose locale is known,
while a document mixes locales ("1.234,56 €" beside "USD 1,234.56") and holds hundreds of numbers among dates,
phone numbers and references; the scanner keeps every reading and the model chooses among them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pipeline.grounding._common import in_order

# An amount with exactly two decimals; thousands grouped by one separator that differs from the decimal mark.
# Matched at every start position (lookahead) so "12 345,67" also yields "345,67".
_AMOUNT = re.compile(
    r"(?=(?<![\w.,\-\u2212])(?P<sign>[-\u2212] ?)?(?P<int>\d{1,3}(?:(?P<grp>[,. \u00a0'])\d{3})(?:(?P=grp)\d{3})*|\d+)"
    r"(?P<dec>[.,])(?P<frac>\d{2})(?!\d|[.,]\d))"
)
# Currency symbols that name one currency in the documents this pipeline reads; "$" alone is read as USD (a CAD or
# AUD document prints its code beside it, which is found as well).
CURRENCY_SYMBOLS = {"\u20ac": "EUR", "\u00a3": "GBP", "$": "USD", "US$": "USD", "\u20b9": "INR", "Rs.": "INR",
                    "Rs": "INR", "\u00a5": "JPY", "Fr.": "CHF", "z\u0142": "PLN", "K\u010d": "CZK", "\u20bd": "RUB"}
_SYMBOL = "|".join(re.escape(s) for s in sorted(CURRENCY_SYMBOLS, key=len, reverse=True))
_SYMBOL_RE = re.compile(rf"(?<![A-Za-z])(?:{_SYMBOL})(?![A-Za-z])")
_CODE_RE = re.compile(r"(?<![A-Za-z])[A-Z]{3}(?![A-Za-z])")
# A whole amount without decimals counts only next to a currency code or symbol ("EUR 1,200", "$950", "Rs 1939").
_CCY = rf"(?:\b[A-Z]{{3}}|{_SYMBOL})"
_WHOLE = r"(?P<sign>[-\u2212] ?)?(?P<int>\d{1,3}(?:(?P<grp>[,. \u00a0'])\d{3})(?:(?P=grp)\d{3})*|\d+)(?![\d]|[.,]\d)"
# A currency after a whole number is its unit only if no number follows it ("2014 $4.11": the $ is 4.11's).
_WHOLE_AMOUNT = (re.compile(rf"{_CCY} ?{_WHOLE}"),
                 re.compile(rf"(?<![\w.,\-\u2212]){_WHOLE} ?{_CCY}(?![A-Za-z])(?! ?\d)"))


def _plain(sign: str | None, whole: str, frac: str) -> str:
    return f"{'-' if sign else ''}{int(re.sub(r'[^0-9]', '', whole))}.{frac}"


def amount_candidates(text: str) -> list[str]:
    """Plain-decimal form ("-1234.50") of every amount the text prints, whatever its locale: any number with two
    decimals, and whole numbers printed next to a currency ("EUR 1.200" -> "1200.00"). A negative amount also
    yields its absolute value: a credit note prints "-233,47 €" and its total is 233.47."""
    found: list[tuple[int, str]] = []
    for m in _AMOUNT.finditer(text):
        grp, dec = m["grp"], m["dec"]
        if grp and grp in ".," and grp == dec:
            continue  # "1.234.56" is not an amount
        found.append((m.start(), _plain(m["sign"], m["int"], m["frac"])))
    for rx in _WHOLE_AMOUNT:
        found.extend((m.start("int"), _plain(m["sign"], m["int"], "00")) for m in rx.finditer(text))
    found += [(pos + 0.5, value[1:]) for pos, value in found if value.startswith("-")]
    return in_order(found)


# Labels of a document's total in the languages the pipeline reads: total, totaal, Gesamt-, -summe, -betrag,
# zu zahlen, amount/balance due, payable, à payer, TTC, te betalen, importe total, montant dû, totale.
_TOTAL_LABEL = re.compile(
    r"(?i)(?<![^\W\d_])(?:grand\s+total|total|totaal|totale|gesamt\w*|\w*summe|\w*betrag|zu\s+zahlen|amount\s+due|"
    r"balance\s+due|due|payable|[\u00e0a]\s+payer|ttc|te\s+betalen|importe\s+total|montant\s+(?:total|d[\u00fbu]))"
    r"(?![^\W\d_])")


def total_candidates(text: str) -> list[str]:
    """The amounts on lines that carry a total label (or on the line below a label that has none of its own),
    when the text has any; otherwise every amount. The total an invoice means is printed by its label, not among
    the unit prices, quantities and tax lines around it; the model still chooses among net, tax and gross."""
    lines = text.splitlines()
    found: list[str] = []
    for i, line in enumerate(lines):
        if _TOTAL_LABEL.search(line):
            values = amount_candidates(line)
            if not values and i + 1 < len(lines):
                values = amount_candidates(lines[i + 1])
            found.extend(values)
    return list(dict.fromkeys(found)) or amount_candidates(text)


@lru_cache(maxsize=1)
def iso_currencies() -> frozenset[str]:
    from babel.numbers import list_currencies

    return frozenset(list_currencies())


def currency_candidates(text: str) -> list[str]:
    """ISO 4217 codes the text prints (as codes, or as a symbol that names one currency), in document order."""
    codes = iso_currencies()
    found = [(m.start(), m.group(0)) for m in _CODE_RE.finditer(text) if m.group(0) in codes]
    found += [(m.start(), CURRENCY_SYMBOLS[m.group(0)]) for m in _SYMBOL_RE.finditer(text)]
    return in_order(found)
