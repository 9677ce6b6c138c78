"""Inline XBRL facts of an HTML filing, read exactly (the filing's own tags, like an e-invoice's XML).

Each numeric fact (`ix:nonFraction`) is its concept (`us-gaap:Revenues`), its context's period (an instant, or a
start and end) and dimensions (a segment's explicit members: a product line, a geography), its unit (`iso4217:USD`,
`USD/shares` for a ratio unit), and its value: the displayed number read by its transformation format
(`ixt:num-dot-decimal`, `ixt:num-comma-decimal`, `ixt:fixed-zero`, ...), times 10^scale, negated when `sign="-"`.
The same fact shown twice (a statement and a note) is one fact: the more precisely shown one, on the first page
that shows it.

The parse is the lxml HTML tree the markup reader walks (engine of no network and no entity expansion); tag and
attribute names arrive lowercased with their prefix (`ix:nonfraction`, `contextref`). No well-kept Python library
reads inline XBRL without a taxonomy download (Arelle needs the taxonomies; py-xbrl fetches them), hence this
reader of the three elements a fact needs.
"""

from __future__ import annotations

import re
from dataclasses import replace
from decimal import Decimal, InvalidOperation

from lxml import etree

from pipeline.ingest.facts import FilingFact

PARSER_VERSION = "ixbrl-1"
_DIGITS = re.compile(r"[^0-9.,]")


def _local(tag: object) -> str:
    return tag.lower() if isinstance(tag, str) else ""


def _text(el: etree._Element) -> str:
    return "".join(el.itertext())


def _contexts(root: etree._Element) -> dict[str, tuple[str | None, str | None, str | None]]:
    """context id -> (start, end, dimensions)."""
    out = {}
    for ctx in root.iter():
        if _local(ctx.tag) != "xbrli:context" or not ctx.get("id"):
            continue
        start = end = None
        dims = []
        for el in ctx.iter():
            name = _local(el.tag)
            if name == "xbrli:startdate":
                start = _text(el).strip()
            elif name in ("xbrli:enddate", "xbrli:instant"):
                end = _text(el).strip()
            elif name in ("xbrldi:explicitmember", "xbrldi:typedmember"):
                dims.append(f"{el.get('dimension')}={_text(el).strip()}")
        out[ctx.get("id")] = (start, end, "; ".join(sorted(dims)) or None)
    return out


def _units(root: etree._Element) -> dict[str, str]:
    """unit id -> "USD", "shares", "USD/shares" (prefixes dropped)."""
    out = {}
    for unit in root.iter():
        if _local(unit.tag) != "xbrli:unit" or not unit.get("id"):
            continue
        num = [_text(m).strip().split(":")[-1] for m in unit.iter() if _local(m.tag) == "xbrli:measure"
               and _local(m.getparent().tag) in ("xbrli:unit", "xbrli:unitnumerator")]
        den = [_text(m).strip().split(":")[-1] for m in unit.iter() if _local(m.tag) == "xbrli:measure"
               and _local(m.getparent().tag) == "xbrli:unitdenominator"]
        out[unit.get("id")] = "*".join(num) + ("/" + "*".join(den) if den else "")
    return out


_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())} | {w: 10 * (i + 2) for i, w in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split())} | {"no": 0, "none": 0, "nil": 0, "a": 1}
_MULTIPLIERS = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}


def number_words(text: str) -> Decimal | None:
    """English number words as the SEC's `ixt-sec:numwordsen` shows them ("five", "twenty-one", "one hundred
    and two", "no"); None when a word is not a number word."""
    total = current = 0
    words = [w for w in re.split(r"[\s\-]+", text.strip().lower()) if w and w != "and"]
    if not words:
        return None
    for w in words:
        if w in _WORDS:
            current += _WORDS[w]
        elif w == "hundred":
            current = max(current, 1) * 100
        elif w in _MULTIPLIERS:
            total += max(current, 1) * _MULTIPLIERS[w]
            current = 0
        else:
            return None
    return Decimal(total + current)


def displayed_value(text: str, fmt: str | None) -> Decimal | None:
    """The number a fact displays, read by its ixt transformation (None when it is not a number)."""
    name = (fmt or "").split(":")[-1].lower().replace("-", "")
    shown = text.strip().lower()
    if name in ("fixedzero", "zerodash") or shown in ("-", "—", "–"):
        return Decimal(0)
    if name.startswith("numwords"):
        return number_words(shown)
    digits = _DIGITS.sub("", text)
    if "commadecimal" in name:  # 1.234,56
        digits = digits.replace(".", "").replace(",", ".")
    else:  # 1,234.56 (num-dot-decimal, the default)
        digits = digits.replace(",", "")
    try:
        return Decimal(digits) if digits.strip(".") else None
    except InvalidOperation:
        return None


def read_facts(root: etree._Element, page_of: dict[int, int]) -> list[FilingFact]:
    """The numeric facts of a parsed inline-XBRL document. The page walk marked each `ix:nonfraction` it met with
    its raw page index (`data-page`); `page_of` maps raw indexes to the document's 1-based pages (hidden facts,
    never shown, count on page 1)."""
    contexts, units = _contexts(root), _units(root)
    facts: dict[tuple[str, str, str | None], FilingFact] = {}
    for el in root.iter():
        if _local(el.tag) != "ix:nonfraction" or el.get("xsi:nil") == "true":
            continue
        ctx_id, concept = el.get("contextref") or "", el.get("name") or ""
        value = displayed_value(_text(el), el.get("format"))
        if ctx_id not in contexts or not concept or value is None:
            continue
        scale = int(el.get("scale") or 0)
        value = value.scaleb(scale)
        if el.get("sign") == "-":
            value = -value
        unit = units.get(el.get("unitref") or "")
        key = (concept, ctx_id, unit)
        start, end, dims = contexts[ctx_id]
        fact = FilingFact(concept=concept, period_start=start, period_end=end, dimensions=dims, unit=unit, value=value,
                        scale=scale, decimals=el.get("decimals"), page=page_of.get(int(el.get("data-page") or -1), 1),
                        context=ctx_id)
        shown = facts.get(key)
        # A fact shown twice is one fact: the more precise of the two (a statement's -423,148 thousands beats the
        # text's -423.1 million), on the page that shows it first.
        if shown is None or _precision(fact.decimals) > _precision(shown.decimals):
            facts[key] = fact if shown is None else replace(fact, page=min(fact.page, shown.page))
    return list(facts.values())


def _precision(decimals: str | None) -> float:
    if decimals is None or decimals.upper() == "INF":
        return float("inf")
    try:
        return float(decimals)
    except ValueError:
        return float("-inf")
