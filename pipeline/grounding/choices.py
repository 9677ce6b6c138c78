"""Candidates per field, then a choice: what the model may answer for each document field, and how sure the
candidates alone make it.

For each field the page's values are found by the field's scanner and tiered by the label they sit under
(`pipeline.grounding.labelled`): values under a strong label ("amount due", "invoice date", "invoice no.") come
first; failing those, values under a weak one ("total", "date"); failing those, unlabelled values; a value under a
label of something else ("subtotal", "due date", "order no.") is a candidate only when nothing better exists. The
decoding schema lists the best tier only, so the model chooses among, say, the two printed grand totals, never
among the unit prices. A field is `decided` when its best tier holds one value and that tier is a labelled one:
the value was taken from where the document labels it. That is what `grounded` and the per-field confidence mean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache

from pipeline.grounding._common import LABELLED_TIERS, STREET, Choice, unique
from pipeline.grounding.amounts import amount_spans, currency_spans
from pipeline.grounding.dates import date_spans, document_date_order
from pipeline.grounding.doc_types import doc_type_choice, titled_line
from pipeline.grounding.issuer import issuer_choice
from pipeline.grounding.labelled import Located, Spans, line_starts, locate
from pipeline.grounding.labels import (
    CASH_WORDS,
    CHANGE_WORDS,
    NEGATIVE,
    ROUNDING_WORDS,
    STRONG,
    WEAK,
    any_label_spans,
)
from pipeline.grounding.locale import document_country, territory_currency

__all__ = ["LABELLED_TIERS", "Choice", "DocumentChoices", "document_choices"]


@dataclass
class DocumentChoices:
    country: str | None
    date_order: str | None
    fields: dict[str, Choice] = field(default_factory=dict)

    def scanners(self) -> dict[str, Spans]:
        """The scanner that finds each printed-value field's values in a line, read as this document's dates are."""
        return {"date": lambda line: date_spans(line, self.date_order), "amount": amount_spans,
                "reference": _reference_spans}


def _tiered(found: list[Located], fallback_unlabelled: bool = True) -> tuple[list[str], str]:
    """Values of the best tier present, in document order."""
    for tier in LABELLED_TIERS:
        values = unique(f.value for f in found if f.tier == tier)
        if values:
            return values, tier
    if fallback_unlabelled:
        values = unique(f.value for f in found if f.tier is None)
        if values:
            return values, "unlabelled"
    values = unique(f.value for f in found if f.tier == NEGATIVE)
    return (values, NEGATIVE) if values else ([], "none")


MAX_SUM_PARTS = 60  # amounts considered for the arithmetic check (the first ones of the page)


# German names each tax as a compound ending in "steuer" (Umsatzsteuer, Versicherungsteuer): the whole word is one.
_TAX_LINE = re.compile(r"(?i)(?<![^\W\d_])(?:vat|tax|gst|sst|mwst|ust|tva|btw|iva|cgst|sgst|igst|utgst|"
                       r"[^\W\d_]*steuer|taxe|imposto|impuesto|moms|alv|dph|pdv)(?![^\W\d_])")


_CGST = re.compile(r"(?i)(?<![^\W\d_])cgst(?![^\W\d_])")
_SGST = re.compile(r"(?i)(?<![^\W\d_])(?:sgst|utgst)(?![^\W\d_])")


def _sums_of_parts(text: str, found: list[Located], totals: list[str]) -> set[str]:
    """Candidate totals the page proves by arithmetic: the total equals a printed amount (the net) plus one or two
    amounts printed on tax lines (VAT; CGST and SGST). Net + tax = gross holds in every language."""
    lines = text.splitlines()
    # values on tax lines (CGST = SGST: both count), not the totals "incl. VAT" lines print
    taxes = [f.value for f in found if _TAX_LINE.search(lines[f.line]) and f.tier not in LABELLED_TIERS][:MAX_SUM_PARTS]
    printed = unique(f.value for f in found)[:MAX_SUM_PARTS]
    tax_d = [Decimal(v) for v in taxes if Decimal(v) > 0]
    net_d = {Decimal(v) for v in printed if Decimal(v) > 0}
    # India's GST within a state is two equal halves, CGST and SGST (or UTGST): one printed half proves the pair
    split = bool(_CGST.search(text) and _SGST.search(text))
    halves = {Decimal(f.value) for f in found
              if split and (_CGST.search(lines[f.line]) or _SGST.search(lines[f.line]))} & set(tax_d)
    proven = set()
    for total in totals:
        t = Decimal(total)
        if any(t - 2 * h in net_d and t - 2 * h > h for h in halves):
            proven.add(total)
        for i, a in enumerate(tax_d):
            if t - a in net_d and t - a > a:  # the net is larger than its tax
                proven.add(total)
            for b in tax_d[i + 1:]:  # two taxes together stay below their net (a summary's net and tax are no pair)
                if t - a - b in net_d and t - a - b > a + b:
                    proven.add(total)
    return proven


_CASH_LINE = re.compile(rf"(?i)(?<![^\W\d_])(?:{CASH_WORDS})(?![^\W\d_])")
_CHANGE_LINE = re.compile(rf"(?i)(?<![^\W\d_])(?:{CHANGE_WORDS})(?![^\W\d_])")
# OCR glues a rounding label to the next word ("RoundingAdjustment", "RoundingRM"): a capital after it still
# ends the word.
_ROUNDING_LINE = re.compile(rf"(?i)(?<![^\W\d_])(?:{ROUNDING_WORDS})(?:(?![^\W\d_])|(?-i:(?<=[a-z])(?=[A-Z])))")


def _line_values(text: str, found: list[Located], rx: re.Pattern[str]) -> list[Decimal]:
    lines = text.splitlines()
    return [Decimal(f.value) for f in found if rx.search(lines[f.line])]


def _paid(text: str, found: list[Located]) -> set[str]:
    """Amounts the page proves were paid: cash tendered minus the change given back, when that difference is
    printed elsewhere on the page too (a sale settled at the counter)."""
    lines = text.splitlines()
    settling = [f for f in found if _CASH_LINE.search(lines[f.line]) or _CHANGE_LINE.search(lines[f.line])]
    elsewhere = {Decimal(f.value) for f in found if f not in settling}
    cash, change = _line_values(text, found, _CASH_LINE), _line_values(text, found, _CHANGE_LINE)
    return {f"{c - g:.2f}" for c in cash for g in change if c - g > 0 and c - g in elsewhere}


# Cash totals are rounded to the smallest coin in circulation: 0.05 in Malaysia, Switzerland, the Netherlands,
# Canada, Australia. (Whole-unit rounding, as in Sweden, is not read: a figure rounded to a unit is too often a
# round sum of cash tendered.)
ROUNDING_UNIT = Decimal("0.05")


def _rounded(text: str, found: list[Located], totals: list[str]) -> list[str]:
    """The total rounded to the nearest coin, when the page prints a rounding line and that rounded figure: what
    was paid. (The adjustment itself is not needed: OCR often loses its sign or digits.)"""
    lines = text.splitlines()
    if not any(_ROUNDING_LINE.search(line) for line in lines):
        return []
    printed = {Decimal(f.value) for f in found}
    out = []
    for total in totals:
        t = Decimal(total)
        r = (t / ROUNDING_UNIT).quantize(Decimal(1), rounding=ROUND_HALF_UP) * ROUNDING_UNIT
        if r != t and r > 0 and r in printed:
            out.append(f"{r:.2f}")
    return unique(out)


# A balance carried over from earlier invoices: an amount due that includes it is not this document's total.
_CARRIED = re.compile(r"(?i)previous\s+balance|balance\s+(?:brought|carried)\s+forward|opening\s+balance|"
                      r"vorheriger\s+saldo|alter\s+saldo|solde\s+pr[\u00e9e]c[\u00e9e]dent|saldo\s+anterior|"
                      r"vorig\s+saldo|arrears")


# A payment already made towards this invoice: what is left to pay (total - payment) is not the invoice's total.
_PAYMENT_MADE = re.compile(r"(?i)(?:amount\s+)?paid(?:\s+amount)?|payments?\s+(?:received|made)|deposit|"
                           r"anzahlung|bereits\s+(?:bezahlt|gezahlt)|acompte|"
                           r"d[\u00e9e]j[\u00e0a]\s+(?:pay|r[\u00e9e]gl)|aanbetaling|reeds\s+betaald|anticipo|"
                           r"pago\s+a\s+cuenta")


def _own_total(text: str, found: list[Located], values: list[str], tier: str) -> tuple[list[str], str]:
    """When the amount due D differs from a printed labelled total T by what the page prints as carried over from
    earlier invoices (D = T + B) or as already paid (D = T - P), the document's own total is T."""
    if tier != STRONG:
        return values, tier
    lines = text.splitlines()
    adjustments = {Decimal(f.value) for f in found if _CARRIED.search(lines[f.line]) and f.tier == NEGATIVE}
    adjustments |= {-Decimal(f.value) for f in found if _PAYMENT_MADE.search(lines[f.line]) and Decimal(f.value) > 0}
    totals = [f.value for f in found if f.tier in LABELLED_TIERS and not _PAYMENT_MADE.search(lines[f.line])]
    own = [t for t in totals if any(Decimal(d) - a == Decimal(t) for d in values for a in adjustments)]
    return (unique(own), WEAK) if own else (values, tier)


def amount_choice(text: str, doc_type: str | None = None) -> Choice:
    # a labelled zero ("TOTAL SAVING: 0.00", "Rounding 0.00") is no document's amount: unlabelled, it is no choice
    found = [f if Decimal(f.value) or f.tier is None else Located(f.value, None, f.line, f.start)
             for f in locate(text, "amount", amount_spans, doc_type)]
    values, tier = _own_total(text, found, *_tiered(found))
    paid = _paid(text, found)
    anywhere = sorted(_sums_of_parts(text, found, unique(f.value for f in found)) | paid, key=Decimal)
    if tier in LABELLED_TIERS:
        rounded = _rounded(text, found, values)
        if len(rounded) == 1:
            return Choice((rounded[0],), "proven", decided=True, why="labelled total + printed rounding")
        proven = [v for v in values if v in anywhere]  # what the arithmetic proves over the whole page
        if len(proven) == 1:
            return Choice((proven[0],), tier, decided=True, why="labelled total = net + tax, or cash - change")
        if tier == STRONG or not proven and not anywhere:
            return Choice(tuple(values), tier, decided=len(values) == 1 and tier == STRONG)
        # a generic label ("Total") the page's arithmetic contradicts: the proven amount is the one
    if anywhere:
        rounded = _rounded(text, found, [anywhere[-1]]) if tier in LABELLED_TIERS else []
        if rounded and rounded[0] in values:  # the labelled figure is the proven total rounded to the coin
            return Choice((rounded[0],), "proven", decided=True, why="proven total + printed rounding")
        return Choice((anywhere[-1],), "proven", decided=len(anywhere) == 1, why="net + tax = gross, or cash - change")
    return Choice(tuple(values), tier, nullable=True)


# What may stand between a title line's number and its date: "Rechnung Nr. 77 vom 30.10.2018", "Invoice No. 5 of
# 3 May 2019", "Facture n° 12 du 02/11/2019", "Beitragsrechnung 24. Januar 2014".
_TITLE_TO_DATE = re.compile(r"(?i)\s*[:,\-\u2013]?\s*(?:vom|von|du|dated|of|from|del|van|de|le|d\.d\.)?\s*[:,]?\s*")


def _title_dated(text: str, found: list[Located]) -> list[Located]:
    """The one date a title line prints right after the document's title and number is the document's date: a
    strong label, whatever weak word ("vom", "du") sits between. (Not a label of the lexicon: a label spanning the
    number would hide the reference's own "Nr." label inside it.)"""
    lines = text.splitlines()
    per_line: dict[int, int] = {}
    for f in found:
        per_line[f.line] = per_line.get(f.line, 0) + 1
    offsets = line_starts(lines)
    out = []
    for f in found:
        prefix = lines[f.line][:f.start - offsets[f.line]]
        title = titled_line().match(prefix)
        if per_line[f.line] == 1 and f.tier != STRONG and title and _TITLE_TO_DATE.fullmatch(prefix[title.end():]):
            f = Located(f.value, STRONG, f.line, f.start)
        out.append(f)
    return out


# A time of day beside a date: a till's or a system's time stamp ("14-03-18 21:49", "10:12AM ... 11-05-16").
_TIME_OF_DAY = re.compile(r"(?<![\d:])(?:[01]?\d|2[0-3]):[0-5]\d(?::[0-5]\d)?(?:\s*[AaPp]\.?[Mm]\.?)?(?![\d:])")
# What joins the two ends of a period: "24 NOVEMBER 2017 - 4 MARCH 2018", "01.03.2020 bis 31.03.2020".
_PERIOD_JOIN = re.compile(r"(?i)\s*(?:-|\u2013|\u2014|to|till|until|through|bis|au|al|tot|t/m)\s*")


def _unlabelled_dates(text: str, found: list[Located], order: str | None) -> list[str]:
    """The unlabelled dates that may be the document's own, best first: the two ends of a period (an offer's, a
    contract's) are not; a date printed with a time of day (when the sale was rung up, or the document made) beats
    one printed without (a rubber stamp, a date in an item's text)."""
    lines = text.splitlines()
    in_period: set[tuple[int, str]] = set()
    for i in {f.line for f in found if f.tier is None}:
        spans = sorted(date_spans(lines[i], order))
        for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
            if _PERIOD_JOIN.fullmatch(lines[i][end:start]):
                in_period |= {(i, first), (i, second)}
    loose = [f for f in found if f.tier is None and (f.line, f.value) not in in_period]
    stamped = [f for f in loose if _TIME_OF_DAY.search(lines[f.line])]
    return unique(f.value for f in stamped or loose)


def date_choice(text: str, order: str | None, doc_type: str | None = None) -> Choice:
    found = _title_dated(text, locate(text, "date", lambda line: date_spans(line, order), doc_type))
    values, tier = _tiered(found)
    if tier == "unlabelled":
        values = _unlabelled_dates(text, found, order)
        if not values:  # only a period's ends are printed: what else the page labels, or nothing
            values, tier = _tiered([f for f in found if f.tier is not None])
    decided = len(values) == 1 and tier in LABELLED_TIERS
    return Choice(tuple(values), tier, nullable=tier in (NEGATIVE, "none"), decided=decided)


_REF_TOKEN = re.compile(r"[^\s:;,()\[\]<>\"'|]+")


def _reference_spans(line: str) -> list[tuple[int, int, str]]:
    """Tokens holding a digit that are not dates or amounts: the candidates for a document number. A token runs
    up to the next label ("993548900Factuurnummer:" holds the number 993548900)."""
    taken = [(s, e) for s, e, _ in date_spans(line)] + [(s, e) for s, e, _ in amount_spans(line)]
    labels = any_label_spans(line)
    out = []
    for m in _REF_TOKEN.finditer(line):
        raw, raw_start = m.group(0), m.start()
        cut = min((s for s, _ in labels if raw_start < s < m.end()), default=m.end())
        raw = raw[:cut - raw_start]
        token = raw.strip(".-/").lstrip("#")
        start = raw_start + raw.find(token) if token else raw_start
        if not (3 <= len(token) <= 40 and any(c.isdigit() for c in token)):
            continue
        if any(s < m.end() and start < e for s, e in taken):
            continue
        glued = re.match(r"^[^\W\d_]*(?:nr|no|n|num|nummer|id|inv|invoice)[.\u00b0\u00ba:#](?P<tail>\w[\w/.\-]*)$",
                         token, re.I)
        if glued:  # "Kundennr.30064443", "Invoice#1/A-42210": the number alone
            token, start = glued["tail"], start + glued.start("tail")
        out.append((start, start + len(token), token))
    return out


_STREET = re.compile(STREET, re.I)
_SELF_NAMED = re.compile(r"(?i)inv(?:oice)?[-/_.#]?\d")


def reference_choice(text: str, doc_type: str | None = None) -> Choice:
    lines = text.splitlines()

    def address(i: int) -> bool:  # a street line, or one that runs on into a street line ("NO 43-45-47G,")
        return bool(_STREET.search(lines[i]) or (lines[i].rstrip().endswith(",") and i + 1 < len(lines)
                                                 and _STREET.search(lines[i + 1])))

    # a bare "No." or "#" on an address line numbers the house ("No. 12, Jalan Permas", "No. 9 Hill Street")
    found = [f for f in locate(text, "reference", _reference_spans, doc_type)
             if not (f.tier == WEAK and address(f.line))]
    # a number whose own prefix says it numbers an invoice ("INV/2023/03/0008" under a bare title) is labelled by it
    found = [Located(f.value, WEAK, f.line, f.start) if f.tier is None and _SELF_NAMED.match(f.value) else f
             for f in found]
    values, tier = _tiered(found, fallback_unlabelled=False)
    if tier not in LABELLED_TIERS:
        return Choice((), "none", nullable=True)
    return Choice(tuple(values), tier, nullable=tier == WEAK, decided=len(values) == 1 and tier == STRONG)


DOMINANT = 2  # a printed currency this many times as frequent as any other, or the country's own, is the one


def currency_choice(text: str, country: str | None, has_amount: bool = True) -> Choice:
    """Printed currencies ranked: the document country's own first, then by how often each is printed (a stray
    OCR "¥" does not outweigh ten "RM"). A dominant one is the only candidate. With none printed, the country's
    currency is offered (with null) for a document that has an amount to be the unit of."""
    spans = currency_spans(text, country)
    counts: dict[str, int] = {}
    for _, _, code in spans:
        counts[code] = counts.get(code, 0) + 1
    local = territory_currency(country) if country else None
    ranked = sorted(counts, key=lambda c: (c != local, -counts[c]))
    if ranked:
        top, rest = ranked[0], ranked[1:]
        if top == local or all(counts[top] >= DOMINANT * counts[c] for c in rest):
            ranked = [top]
        return Choice(tuple(ranked), "printed", decided=len(ranked) == 1 and not rest)
    inferred = local if has_amount else None
    if inferred:
        return Choice((inferred,), "inferred", nullable=True, why=f"country {country}")
    return Choice((), "none", nullable=True)


@lru_cache(maxsize=256)
def document_choices(text: str) -> DocumentChoices:
    """Every candidate field's choice for one document text (cached: the decoding schema and the finished row's
    checks ask for the same document)."""
    printed = unique(code for _, _, code in currency_spans(text))
    country = document_country(text, printed)
    order = document_date_order(text, country)
    out = DocumentChoices(country, order)
    out.fields["doc_type"] = kind = doc_type_choice(text)
    doc_type = kind.values[0] if kind.decided else None  # its labels read the other fields
    out.fields["issuer"] = issuer_choice(text, doc_type)
    out.fields["reference"] = reference_choice(text, doc_type)
    out.fields["date"] = date_choice(text, order, doc_type)
    out.fields["amount"] = amount = amount_choice(text, doc_type)
    out.fields["currency"] = currency_choice(text, country, has_amount=bool(amount.values))
    return out
