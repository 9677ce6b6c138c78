"""Narrowing a document's decoding schema to its candidates, and what a finished row can be trusted for."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from pipeline.grounding._common import LABELLED_TIERS, Choice
from pipeline.grounding.accounts import account_candidates
from pipeline.grounding.choices import document_choices
from pipeline.grounding.spans import party_candidates

# v2.2: a labelled invoice number limits the reference to labelled values; v2.3: a labelled total, the amount;
# v2.4: a window's flags and risk level bounded by its non-zero counts (pipeline.grounding.windows);
# v3: candidates tiered by the label they sit under (pipeline.grounding.choices), doc type and issuer candidates,
# the date order and currency of the document's country
GROUNDING_VERSION = "ground-v5"  # v5: instruction-like passages removed from what the model reads
"""Part of every model row's id: new scanners can change what the model may answer."""

CHOICE_FIELDS = ("doc_type", "issuer", "reference", "date", "currency", "amount")
"""Fields whose candidates come tiered from `pipeline.grounding.choices`."""

SCANNED_FIELDS: dict[str, Callable[[str], list[str]]] = {"counterparty": party_candidates,
                                                         "account": account_candidates}
"""Fields still narrowed to every value of their kind the text prints."""

CANDIDATE_FIELDS = CHOICE_FIELDS + tuple(SCANNED_FIELDS)

# Most values one field's enum may list. A long statement can hold thousands of amounts; every enum value becomes
# grammar the matcher walks at each step and schema compilation grows with it, so one document could stall its
# whole bucket. Past the cap the enum keeps the first and the last values in document order (dates and parties
# sit near the top, totals near the bottom).
MAX_ENUM_VALUES = 64
# Names: a page yields a few hundred spans, and the right one sits anywhere in it (a customer in the middle), so
# these enums may be longer; they are literals of a few words each.
MAX_SPAN_VALUES = 512


@lru_cache(maxsize=256)
def _scanned(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((name, tuple(scan(text))) for name, scan in SCANNED_FIELDS.items())


def field_choices(text: str) -> dict[str, Choice]:
    """Every candidate field's choice: tiered candidates for the scored fields, every printed value for the
    others (nullable: a document need not name them)."""
    out = dict(document_choices(text).fields)
    for name, values in _scanned(text):
        out[name] = Choice(values, "printed" if values else "none", nullable=True)
    return out


def document_candidates(text: str) -> dict[str, list[str]]:
    return {name: list(choice.values) for name, choice in field_choices(text).items()}


def _capped(values: list[str], cap: int = MAX_ENUM_VALUES) -> list[str]:
    if len(values) <= cap:
        return values
    head = cap // 2
    return values[:head] + values[len(values) - (cap - head):]


def _narrow(prop: dict[str, Any], choice: Choice, cap: int) -> dict[str, Any]:
    """`prop` with its string branch replaced by an enum of the candidates its pattern and lengths accept, and its
    null branch kept only where the choice allows null. With no candidate, null alone where the schema allows it;
    otherwise the property is left as it is."""
    branches = prop["anyOf"] if "anyOf" in prop else [prop]
    has_null = any(b.get("type") == "null" for b in branches)
    out = []
    for branch in branches:
        if branch.get("type") == "null":
            continue
        if "enum" in branch:  # an enum type (doc_type): its members that are candidates
            kept = [v for v in branch["enum"] if v in choice.values]
        elif branch.get("type") == "string":
            pattern = branch.get("pattern")
            lo, hi = branch.get("minLength", 0), branch.get("maxLength", 10**9)
            kept = [v for v in choice.values if (pattern is None or re.search(pattern, v)) and lo <= len(v) <= hi]
        else:
            out.append(branch)
            continue
        if kept:
            out.append({"type": "string", "enum": _capped(list(dict.fromkeys(kept)), cap)})
    if has_null and (choice.nullable or not out):
        out.append({"type": "null"})
    if not out:
        return prop
    return out[0] if len(out) == 1 else {"anyOf": out}


def grounded_schema(schema: dict[str, Any], choices: dict[str, Choice]) -> dict[str, Any]:
    """Copy of a decoding schema whose candidate fields only admit their candidates (or null where allowed)."""
    out = copy.deepcopy(schema)
    for name, choice in choices.items():
        if name not in out["properties"]:
            continue
        prop = out["properties"][name]
        if "$ref" in prop:  # an enum type: inline it so it can be narrowed
            ref = prop["$ref"].rsplit("/", 1)[-1]
            prop = copy.deepcopy(schema.get("$defs", {}).get(ref, prop))
        cap = MAX_SPAN_VALUES if name in ("issuer", "counterparty", "reference") else MAX_ENUM_VALUES
        out["properties"][name] = _narrow(prop, choice, cap)
    return out


NEVER_CONFIDENT = frozenset({"issuer"})
"""Fields the model path never marks confident: on the development corpora an issuer taken as the one legal-entity
name of the sender block was right 6 times in 8 (the platform or the group, not the entity, is often meant), far
from the 97% a confident field must reach (docs/eval/real-corpora.md)."""


OCR_CONFIDENT = frozenset({"doc_type", "currency", "amount"})
"""The fields text read by OCR may mark confident. OCR misreads digits and letters: on the shared receipt scans
(RapidOCR) the values left as the one candidate were right 90/90 (type), 65/65 (currency) and 70/72 (amount) on
the development slice and 30/30, 24/24, 24/24 held out, but dates 40/43 and issuers about 9 in 10, and a reference
is a string of digits one misread changes (docs/eval/real-corpora.md). So a scanned row's date, reference and
issuer always need review."""


def field_confidence(fields: dict[str, Any], text: str, ocr: bool = False) -> dict[str, bool]:
    """Per scored field: True when the value is the one candidate a labelled place (or the page's arithmetic)
    left, so no choice was made; False where the model chose among several, took an unlabelled value or null, for
    the fields in NEVER_CONFIDENT, and on text read by OCR (`ocr`) for the fields outside OCR_CONFIDENT."""
    choices = document_choices(text).fields
    out = {}
    for name in CHOICE_FIELDS:
        choice, value = choices[name], fields.get(name)
        # null is never sure: a label the lexicons do not know, or a page OCR could not read, also yields none
        out[name] = ((not ocr or name in OCR_CONFIDENT) and name not in NEVER_CONFIDENT and value is not None
                     and choice.decided and value in choice.values)
    return out


def is_grounded(fields: dict[str, Any], text: str) -> bool:
    """Whether every value the row holds was taken from where the document labels it: reference, date and amount
    from under their labels, the currency printed as a unit, the issuer from the sender block; counterparty and
    account among the values the text prints."""
    choices = field_choices(text)
    for name in ("issuer", "reference", "date", "amount"):
        value = fields.get(name)
        if value is not None and not (value in choices[name].values and choices[name].tier in (*LABELLED_TIERS, "proven")):
            return False
    currency = fields.get("currency")
    if currency is not None and not (currency in choices["currency"].values and choices["currency"].tier == "printed"):
        return False
    for name in SCANNED_FIELDS:
        value = fields.get(name)
        if value is not None and value not in choices[name].values:
            return False
    return True
