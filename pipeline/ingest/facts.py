"""A filing's numeric facts, whichever reader found them, and their Arrow table.

    FilingFact   one fact: concept, period, dimensions, unit, value in full units, page, method
    facts_to_table(docs) -> pa.Table   (FACT_ARROW_SCHEMA)

`method` names the reader: "xbrl" (the filing's inline XBRL tags, exact) or "table" (a statement table read from the
text, pipeline.ingest.statement_tables). A document with inline XBRL is read by its tags only.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

from schemas import FACT_ARROW_SCHEMA

SCALE_WORDS = {3: "thousands", 6: "millions", 9: "billions", -2: "percent"}
# How sure a reader is of a fact it returns: a tag states concept, period and unit; a table row's concept and
# column period are inferred from its label and header, so it is below 1.0. A prior, not a calibrated probability:
# on the corpora of docs/eval/filing-facts.md every table fact checked that was found was right, on too few filings
# to calibrate.
METHOD_CONFIDENCE = {"xbrl": 1.0, "table": 0.9}


@dataclass(frozen=True)
class FilingFact:
    concept: str
    period_start: str | None  # ISO date; None for an instant
    period_end: str | None
    dimensions: str | None  # "axis=member; ..." of the context's segment, None for the entity as a whole
    unit: str | None
    value: Decimal
    scale: int
    decimals: str | None
    page: int  # 1-based page of the filing where the fact is shown first
    context: str
    method: str = "xbrl"
    label: str | None = None  # the row label a table fact was read from


# The concepts an analyst reads first, each with the elements filings use for it, in order of preference.
HEADLINE_CONCEPTS = {
    "revenue": ("us-gaap:Revenues", "us-gaap:RevenueFromContractWithCustomerExcludingAssessedTax",
                "us-gaap:SalesRevenueNet", "ifrs-full:Revenue"),
    "net_income": ("us-gaap:NetIncomeLoss", "ifrs-full:ProfitLossAttributableToOwnersOfParent"),
    "eps_diluted": ("us-gaap:EarningsPerShareDiluted", "us-gaap:EarningsPerShareBasicAndDiluted",
                    "ifrs-full:DilutedEarningsPerShare"),
}


def current_period_fact(facts: list[FilingFact], headline: str, months: int | None = None) -> FilingFact | None:
    """A headline figure of the filing's own period: entity-wide (no dimension), the latest period end, and of those
    the period nearest `months` long (12 for an annual report, 3 for a quarterly one: a 10-K's notes also show its
    fourth quarter), else the shortest; the first listed element that has one."""
    for concept in HEADLINE_CONCEPTS[headline]:
        found = [f for f in facts if f.concept == concept and f.dimensions is None and f.period_end]
        if found:
            latest = max(f.period_end or "" for f in found)
            ending = [f for f in found if f.period_end == latest]
            if months is None:
                return max(ending, key=lambda f: f.period_start or "")
            return min(ending, key=lambda f: abs(period_months(f) - months))
    return None


def period_months(fact: FilingFact) -> float:
    """A duration fact's length in months (0 for an instant)."""
    if not fact.period_start or not fact.period_end:
        return 0.0
    days = (dt.date.fromisoformat(fact.period_end[:10]) - dt.date.fromisoformat(fact.period_start[:10])).days
    return days / 30.44


def facts_to_table(docs: list[Any]) -> pa.Table:
    """One row per fact of every document (`PdfDocument.facts`)."""
    rows = [{"doc_id": d.doc_id, "source_file": d.source_file, "concept": f.concept, "context": f.context,
             "period_start": _date(f.period_start), "period_end": _date(f.period_end), "dimensions": f.dimensions,
             "value": f.value, "unit": f.unit, "scale_printed": SCALE_WORDS.get(f.scale), "page": f.page,
             "method": f.method, "label": f.label, "confidence": METHOD_CONFIDENCE[f.method]}
            for d in docs for f in d.facts]
    return pa.Table.from_pylist(rows, schema=FACT_ARROW_SCHEMA)


def _date(text: str | None) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text[:10]) if text else None
    except ValueError:
        return None
