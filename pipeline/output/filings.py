"""The reduce step of a filing read whole: its sections' results and its facts become one documents row.

    filing_row(plan, section_rows, facts, run) -> dict   (a documents row, route "sections")

The row's fields come from where the filing labels them, without the model: the registrant (issuer), the
Commission File Number or Registration No. (reference) and the period the filing reports on (date) from the cover
(pipeline.ingest.filing_cover); the currency from the unit of its revenue fact. A filing has no single headline
amount, so `amount` stays null (its figures are rows of filing_facts). What the model read is counted from the
section rows that exist: `text_read_fraction` is the share of the text the sections that were summarised showed
the model, so a section that failed (an error row) lowers it instead of vanishing.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.grounding.provenance import text_sources
from pipeline.grounding.schema import CHOICE_FIELDS
from pipeline.ingest.facts import FilingFact, current_period_fact
from pipeline.ingest.filing_cover import COVER_CHARS
from pipeline.plan.bucketing import FilingPlan
from schemas import DocumentExtraction, arrow_values

_MONTHS_OF_FORM = {"10-K": 12, "annual_report": 12, "10-Q": 3}


def filing_currency(facts: list[FilingFact], form_type: str) -> str | None:
    """The ISO code of the filing's revenue (else net income) fact, where its unit is a currency."""
    for headline in ("revenue", "net_income"):
        f = current_period_fact(facts, headline, _MONTHS_OF_FORM.get(form_type))
        if f is not None and f.unit and len(f.unit) == 3 and f.unit.isalpha() and f.unit.isupper():
            return f.unit
    return None


def filing_facts_of(table: pa.Table, doc_id: str) -> list[FilingFact]:
    """The facts of one document from a filing_facts-shaped table."""
    rows = table.filter(pc.equal(table.column("doc_id"), doc_id)).to_pylist() if table.num_rows else []
    return [FilingFact(concept=r["concept"], period_start=r["period_start"].isoformat() if r["period_start"] else None,
                       period_end=r["period_end"].isoformat() if r["period_end"] else None,
                       dimensions=r["dimensions"], unit=r["unit"], value=r["value"], scale=0, decimals=None,
                       page=r["page"], context=r["context"], method=r["method"], label=r.get("label")) for r in rows]


def filing_row(plan: FilingPlan, section_rows: dict[str, dict[str, Any]], facts: list[FilingFact],
               run: dict[str, str]) -> dict[str, Any]:
    """The filing's documents row. `section_rows`: the filing_sections rows that exist (this run's and earlier
    published ones) by row id, each with at least chars_read, prompt_tokens and output_tokens."""
    unit = plan.unit
    ctx = unit.context
    done = [section_rows[rid] for rid, _ in plan.sections if rid in section_rows]
    read = sum(int(r["chars_read"]) for r in done)
    fraction = read / len(unit.text) if unit.text else 1.0
    fields = {"doc_type": "filing", "issuer": ctx.get("registrant"), "counterparty": None,
              "reference": ctx.get("file_number"), "date": ctx.get("period_end"),
              "currency": filing_currency(facts, ctx["form_type"]), "amount": None, "account": None}
    row: dict[str, Any] = {"row_id": unit.row_id, "source_file": unit.source_file}
    row.update({k: v for k, v in ctx.items() if k not in ("registrant", "period_end", "file_number")})
    row.update(arrow_values(DocumentExtraction, fields))
    row.update(truncated=fraction < 1.0, text_read_fraction=fraction, route="sections",
               prompt_tokens_full=sum(int(r["prompt_tokens"]) for r in done), sections_read=len(done),
               sections_total=len(plan.sections), extraction_method="filing_cover", grounded=True,
               # no field was a model's choice: each is the cover's (or deliberately null: a filing has no amount)
               field_confident={n: fields.get(n) is not None or n == "amount" for n in CHOICE_FIELDS},
               needs_review=len(done) < len(plan.sections), field_logprobs=None,
               # the cover's values, found on the cover (the currency is the facts', not a printed place)
               field_sources=[s.as_row() for s in text_sources(
                   {k: fields[k] for k in ("issuer", "reference", "date")}, unit.text[:COVER_CHARS])],
               prompt_tokens=sum(int(r["prompt_tokens"]) for r in done),
               output_tokens=sum(int(r["output_tokens"]) for r in done), finish_reason=None)
    row.update(run)
    return row
