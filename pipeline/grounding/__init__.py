"""Grounded extraction: candidates per field from where the document labels them, then the model's choice.

A small model copies long digit runs imperfectly (an IBAN drifts into repeated digits, an amount borrows digits
from a nearby reference) and fills names from its training set. Those are hallucinations no schema pattern can
catch, and in a financial pipeline a plausible-looking wrong IBAN is worse than a null. So, per document, the
pipeline scans the prompt's text for every value of each kind that it prints, rewrites each to the canonical form
the schema asks for (ISO date, plain decimal, IBAN without spaces, ISO 4217 code; names and numbers verbatim) and
narrows the field's decoding schema to that list (an `enum`). The model still decides which value is the right
one; the constraint only rules out values the document never states.

    dates.py     dates in numeric and month-name forms, months in several languages (dateparser)
    amounts.py   amounts in any locale, credit notes' absolute totals; currency codes and symbols
    accounts.py  IBANs validated by checksum (schwifty), other account numbers
    spans.py     counterparty candidates: verbatim spans of the text
    labels.py    the labels documents print next to amounts, dates and numbers, per tier, in many languages
    labelled.py  which label each printed value sits under (same line, line below, header row over value row)
    locale.py    the document's country (IBAN, VAT number, legal suffix, currency) -> date order and currency
    choices.py   tiered candidates per field (strong label > weak label > unlabelled > labelled as something else)
    issuer.py    issuer candidates: legal-entity names and the sender block, never the recipient's
    doc_types.py document type from title words and cues
    schema.py    narrowing a decoding schema to the candidates; `grounded` and per-field confidence of a row
    focus.py     what of a document the model reads: the lines its open choices lie on, and what frames them

The engine stays unaware of this: it receives an ordinary JSON schema per request.
"""

from pipeline.grounding._common import Choice
from pipeline.grounding.accounts import account_candidates
from pipeline.grounding.amounts import amount_candidates, currency_candidates
from pipeline.grounding.choices import document_choices
from pipeline.grounding.dates import date_candidates
from pipeline.grounding.focus import focused_text
from pipeline.grounding.schema import (
    CANDIDATE_FIELDS,
    CHOICE_FIELDS,
    GROUNDING_VERSION,
    MAX_ENUM_VALUES,
    document_candidates,
    field_choices,
    field_confidence,
    grounded_schema,
    is_grounded,
)
from pipeline.grounding.spans import party_candidates

__all__ = ["CANDIDATE_FIELDS", "CHOICE_FIELDS", "Choice", "GROUNDING_VERSION", "MAX_ENUM_VALUES", "account_candidates",
           "amount_candidates", "currency_candidates", "date_candidates", "document_candidates", "document_choices",
           "field_choices", "field_confidence", "focused_text", "grounded_schema", "is_grounded", "party_candidates"]
