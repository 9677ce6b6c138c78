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
# Matched at every start position (lookahead) so "12 345,67" also yields "345,67". A figure followed by "%" is a
# rate ("GST @6.00%", "MwSt. 19,00 %"), never an amount.
_AMOUNT = re.compile(
    r"(?=(?<![\w.,'\-\u2212])(?P<sign>[-\u2212] ?)?(?P<int>\d{1,3}(?:(?P<grp>[,. \u00a0'])\d{3})(?:(?P=grp)\d{3})*|\d+)"
    r"(?P<dec>[.,])(?P<frac>\d{2})(?!\d|[.,]\d|[ \u00a0]?%))"
)
# Currency symbols that name one currency in the documents this pipeline reads; "$" alone is read as USD (a CAD or
# AUD document prints its code beside it, which is found as well).
CURRENCY_SYMBOLS = {"\u20ac": "EUR", "\u00a3": "GBP", "$": "USD", "US$": "USD", "\u20b9": "INR", "Rs.": "INR",
                    "Rs": "INR", "\u00a5": "JPY", "Fr.": "CHF", "z\u0142": "PLN", "K\u010d": "CZK", "\u20bd": "RUB"}
_SYMBOL = "|".join(re.escape(s) for s in sorted(CURRENCY_SYMBOLS, key=len, reverse=True))
_SYMBOL_RE = re.compile(rf"(?<![A-Za-z])(?:{_SYMBOL})(?![A-Za-z])")
_CODE_RE = re.compile(r"(?<![A-Za-z0-9])[A-Z]{3}(?![A-Za-z0-9])")
# A whole amount without decimals counts only next to a currency code or symbol ("EUR 1,200", "$950", "Rs 1939").
_CCY = rf"(?:\b(?P<code>[A-Z]{{3}})|{_SYMBOL})"
_WHOLE = r"(?P<sign>[-\u2212] ?)?(?P<int>\d{1,3}(?:(?P<grp>[,. \u00a0'])\d{3})(?:(?P=grp)\d{3})*|\d+)(?![\d]|[.,]\d)"
# A currency after a whole number is its unit only if no number follows it ("2014 $4.11": the $ is 4.11's).
# "$2,779.5": one decimal, but a currency sign in front says it is money (the cents' trailing zero dropped).
_ONE_DECIMAL = re.compile(rf"{_CCY} ?(?P<sign>[-\u2212] ?)?(?P<int>\d{{1,3}}(?:(?P<grp>[,. \u00a0'])\d{{3}})*|\d+)"
                          rf"(?P<dec>[.,])(?P<frac>\d)(?![\d]|[.,]\d)")
_WHOLE_AMOUNT = (re.compile(rf"{_CCY} ?{_WHOLE}"),
                 re.compile(rf"(?<![\w.,\-\u2212]){_WHOLE} ?{_CCY}(?![A-Za-z])(?! ?\d)"))


# OCR of a receipt's right-hand column splits the cents off ("RM 31. 20"): read so only at a line's end, where a
# value column ends, never inside running text.
_SPLIT_DECIMAL = re.compile(r"(?<![\w.,'\-\u2212])(?P<sign>[-\u2212] ?)?(?P<int>\d{1,6})[.,] (?P<frac>\d{2})[ \t]*$", re.M)


def _plain(sign: str | None, whole: str, frac: str) -> str:
    return f"{'-' if sign else ''}{int(re.sub(r'[^0-9]', '', whole))}.{frac}"


# A currency glued to its figure ("RM8.48", "EUR12.50"; OCR of a receipt also glues it to the label before it:
# "Tota1RM14.20"): the code is blanked out (same length, so positions hold) before two-decimal figures are scanned.
_GLUED_CODE = re.compile(r"(?<![A-Z])(?P<code>RM|[A-Z]{3})(?=[-\u2212]?\d)")


def _unglued(text: str) -> str:
    return _GLUED_CODE.sub(lambda m: " " * len(m[0]) if m["code"] == "RM" or m["code"] in iso_currencies() else m[0],
                           text)


def amount_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, plain decimal) of every amount the text prints (see `amount_candidates`), in text order."""
    found: list[tuple[int, int, str]] = []
    for m in _AMOUNT.finditer(_unglued(text)):
        grp, dec = m["grp"], m["dec"]
        if grp and grp in ".," and grp == dec:
            continue  # "1.234.56" is not an amount
        start = m.start("sign") if m["sign"] else m.start("int")
        found.append((start, m.end("frac"), _plain(m["sign"], m["int"], m["frac"])))
    for m in _ONE_DECIMAL.finditer(text):
        if (m["code"] is None or m["code"] in iso_currencies()) and not (m["grp"] and m["grp"] == m["dec"]):
            found.append((m.start("int"), m.end("frac"), _plain(m["sign"], m["int"], m["frac"] + "0")))
    for m in _SPLIT_DECIMAL.finditer(text):
        found.append((m.start("sign") if m["sign"] else m.start("int"), m.end("frac"),
                      _plain(m["sign"], m["int"], m["frac"])))
    for rx in _WHOLE_AMOUNT:  # a code must be an ISO 4217 one: "INV-100" is an invoice number, not -100 of INV
        found.extend((m.start("int"), m.end("int"), _plain(m["sign"], m["int"], "00")) for m in rx.finditer(text)
                     if m["code"] is None or m["code"] in iso_currencies())
    found.sort()
    return found


def amount_candidates(text: str) -> list[str]:
    """Plain-decimal form ("-1234.50") of every amount the text prints, whatever its locale: any number with two
    decimals, and whole numbers printed next to a currency ("EUR 1.200" -> "1200.00"). A negative amount also
    yields its absolute value: a credit note prints "-233,47 €" and its total is 233.47."""
    found: list[tuple[float, str]] = [(start, value) for start, _, value in amount_spans(text)]
    found += [(pos + 0.5, value[1:]) for pos, value in found if value.startswith("-")]
    return in_order(found)  # type: ignore[arg-type]


@lru_cache(maxsize=1)
def iso_currencies() -> frozenset[str]:
    # lazy: CLDR tables load on first use
    from babel.numbers import list_currencies

    return frozenset(list_currencies())


# Symbols that name one currency wherever they are printed; "$", "kr", "¥" and the like are read by the
# document's country (`_local_symbol`), and only fall back to this table when the country is unknown.
_GLOBAL_SYMBOLS = {**CURRENCY_SYMBOLS, "RM": "MYR", "S$": "SGD", "A$": "AUD", "C$": "CAD", "HK$": "HKD",
                   "NZ$": "NZD", "R$": "BRL", "Rp": "IDR", "₩": "KRW", "₺": "TRY", "฿": "THB",
                   "₫": "VND", "₱": "PHP", "₪": "ILS", "Ft": "HUF", "kr": "SEK", "kr.": "DKK",
                   "lei": "RON", "CHF": "CHF"}
# Symbols many countries' currencies use: read in the document's country, or not at all once that is known.
_SHARED_SYMBOLS = frozenset({"$", "kr", "kr.", "\u00a5", "Fr."})
# A symbol counts next to a number, as a column unit in parentheses or after a currency label; letters-only symbols
# are also words ("RM" a room, "Ft" feet, "kr" an abbreviation), so a label is not enough for them.
_WORDLIKE = frozenset(s for s in _GLOBAL_SYMBOLS if s.rstrip(".").isalpha())
_ALL_SYMBOLS = "|".join(re.escape(s) for s in sorted(_GLOBAL_SYMBOLS, key=len, reverse=True))
_ANY_SYMBOL_RE = re.compile(rf"(?<![A-Za-z])(?:{_ALL_SYMBOLS})(?![A-Za-z])")
# On the same line, and a number, not a count or a size ("CUP 48X230ML" is a product, not Cuban pesos).
_NUMBER_AFTER = re.compile(r"^[ \t\u00a0]{0,2}[-\u2212]?\d(?![\d.,]*[^\W\d_])")
# a number (not the digits of an item code such as "R3") just before, on the same line
_NUMBER_BEFORE = re.compile(r"(?:^|(?<=[^\w.,]))[-\u2212]?\d[\d.,]*[ \t\u00a0]{0,2}\Z")
_NUMBER_WORDS = re.compile(r"(?i)^\s+(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
                           r"forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|lakh|million)\b")
_CURRENCY_LABEL = re.compile(r"(?i)(?<![^\W\d_])(?:currency|währung|devise|moneda|valuta|divisa|munt|in|amount|betrag|"
                             r"montant|importe|total)\s*[:(]?\s*$")


@lru_cache(maxsize=256)
def _local_symbol(symbol: str, country: str) -> str | None:
    """The currency of `country` whose symbol in that country's locale (CLDR, through babel) is `symbol`."""
    # lazy: CLDR tables load on first use
    from babel import Locale, UnknownLocaleError
    from babel.languages import get_official_languages
    from babel.numbers import get_currency_symbol, get_territory_currencies

    for code in get_territory_currencies(country, tender=True):
        for lang in (*get_official_languages(country), "en"):
            try:
                Locale(lang, country)
            except (UnknownLocaleError, ValueError):
                continue
            if get_currency_symbol(code, f"{lang}_{country}").casefold() == symbol.casefold():
                return code
    return None


def _near_number(text: str, start: int, end: int) -> bool:
    line_before = text[max(0, start - 24):start].rsplit("\n", 1)[-1]
    return bool(_NUMBER_AFTER.search(text[end:end + 24]) or _NUMBER_BEFORE.search(line_before))


def currency_spans(text: str, country: str | None = None) -> list[tuple[int, int, str]]:
    """(start, end, ISO 4217 code) of each currency the text names as the unit of an amount: a code next to a
    number, in parentheses, after a currency label, or before an amount in words; a symbol (read in the
    document's `country` where its CLDR locale uses it, e.g. "kr" in Norway is NOK). A code inside a name is not a
    currency: "SDN BHD" is a Malaysian company suffix, not Bahraini dinars."""
    codes = iso_currencies()
    found: list[tuple[int, int, str]] = []
    for m in _CODE_RE.finditer(text):
        code = m.group(0)
        if code not in codes:
            continue
        start, end = m.span()
        before = text[max(0, start - 24):start]
        if (_near_number(text, start, end) or text[start - 1:start] == "(" or _CURRENCY_LABEL.search(before)
                or _NUMBER_WORDS.match(text[end:end + 12]) or text[end:end + 1] == ")"):
            found.append((start, end, code))
    for m in _ANY_SYMBOL_RE.finditer(text):
        symbol = m.group(0)
        start, end = m.span()
        if not (_near_number(text, start, end) or text[start - 1:start] == "("
                or (symbol not in _WORDLIKE and _CURRENCY_LABEL.search(text[max(0, start - 24):start]))):
            continue  # a sign with no amount beside it is a stray mark (OCR reads "#" or "S" as "$")
        code = (_local_symbol(symbol, country) if country else None) or _GLOBAL_SYMBOLS[symbol]
        if country and symbol in _SHARED_SYMBOLS and code != _local_symbol(symbol, country):
            continue  # "$" on a Malaysian receipt is not US dollars: of the many "$" currencies, none is local
        found.append((start, end, code))
    found.sort()
    return found


def currency_candidates(text: str, country: str | None = None) -> list[str]:
    """ISO 4217 codes the text names as a unit (see `currency_spans`), in document order."""
    return in_order([(start, code) for start, _, code in currency_spans(text, country)])
