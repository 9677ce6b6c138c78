"""Narrowing a document's decoding schema to the values its text prints, and checking a finished row."""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from collections.abc import Callable
from typing import Any

from pipeline.grounding.accounts import account_candidates
from pipeline.grounding.amounts import currency_candidates, total_candidates
from pipeline.grounding.dates import date_candidates
from pipeline.grounding.spans import party_candidates, reference_candidates

# v2.2: a labelled invoice number limits the reference to labelled values; v2.3: a labelled total, the amount;
# v2.4: a window's flags and risk level bounded by its non-zero counts (pipeline.grounding.windows)
GROUNDING_VERSION = "ground-v2.4"
"""Part of every model row's id: new scanners can change what the model may answer."""

CANDIDATE_FIELDS: dict[str, Callable[[str], list[str]]] = {
    "issuer": party_candidates, "counterparty": party_candidates, "reference": reference_candidates,
    "date": date_candidates, "currency": currency_candidates, "amount": total_candidates,
    "account": account_candidates,
}
"""Document fields whose decoding is narrowed to values found in the text, and their scanners."""

SPAN_FIELDS = ("issuer", "counterparty", "reference")
"""Fields whose value must be a verbatim span of the text (up to whitespace and case)."""

NULL_WITHOUT_CANDIDATES = frozenset({"currency"})
"""Fields that are null when the text names no candidate (a document that prints no currency has none); the
others keep their plain pattern, so nothing the model could say before is lost on text the scanners miss."""

# Most values one field's enum may list. A long statement can hold thousands of amounts; every enum value becomes
# grammar the matcher walks at each step and schema compilation grows with it, so one document could stall its
# whole bucket. Past the cap the enum keeps the first and the last values in document order (dates and parties
# sit near the top, totals near the bottom).
MAX_ENUM_VALUES = 64
# Names and numbers: a page yields a few hundred spans, and the right one sits anywhere in it (a seller in the
# footer, a customer in the middle), so these enums may be longer; they are literals of a few words each.
MAX_SPAN_VALUES = 512


@lru_cache(maxsize=256)
def _scanned(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Every scanner's values for one text, once: the decoding schema and the finished row's `grounded` check
    both ask for the same document, and the date scanner (dateparser) is the costly part."""
    by_scan: dict[Callable[[str], list[str]], tuple[str, ...]] = {}
    for scan in CANDIDATE_FIELDS.values():
        if scan not in by_scan:
            by_scan[scan] = tuple(scan(text))
    return tuple((name, by_scan[scan]) for name, scan in CANDIDATE_FIELDS.items())


def document_candidates(text: str) -> dict[str, list[str]]:
    return {name: list(values) for name, values in _scanned(text)}


def _capped(values: list[str], cap: int = MAX_ENUM_VALUES) -> list[str]:
    if len(values) <= cap:
        return values
    head = cap // 2
    return values[:head] + values[len(values) - (cap - head):]


def _narrow(prop: dict[str, Any], values: list[str], null_if_none: bool, cap: int = MAX_ENUM_VALUES) -> dict[str, Any]:
    """`prop` with its string branch replaced by an enum of (at most MAX_ENUM_VALUES of) the values its pattern
    and lengths accept; with none, the string branch is kept, or dropped when `null_if_none` and null is allowed."""
    branches = prop["anyOf"] if "anyOf" in prop else [prop]
    nullable = any(b.get("type") == "null" for b in branches)
    out = []
    for branch in branches:
        if branch.get("type") == "string" and "enum" not in branch:
            pattern = branch.get("pattern")
            lo, hi = branch.get("minLength", 0), branch.get("maxLength", 10**9)
            kept = [v for v in values if (pattern is None or re.search(pattern, v)) and lo <= len(v) <= hi]
            if not kept:
                if null_if_none and nullable:
                    continue
                return prop
            branch = {"type": "string", "enum": _capped(kept, cap)}
        out.append(branch)
    if "anyOf" not in prop:
        return out[0]
    return out[0] if len(out) == 1 else {"anyOf": out}


def grounded_schema(schema: dict[str, Any], candidates: dict[str, list[str]]) -> dict[str, Any]:
    """Copy of a decoding schema whose candidate fields only admit the given values (or null where allowed)."""
    out = copy.deepcopy(schema)
    for name, values in candidates.items():
        if name in out["properties"] and (values or name in NULL_WITHOUT_CANDIDATES):
            cap = MAX_SPAN_VALUES if name in SPAN_FIELDS else MAX_ENUM_VALUES
            out["properties"][name] = _narrow(out["properties"][name], values, name in NULL_WITHOUT_CANDIDATES, cap)
    return out


def _squash(s: str) -> str:
    return " ".join(s.split()).casefold()


def is_grounded(fields: dict[str, Any], text: str) -> bool:
    """Whether every value an extraction holds is one the document states: names and numbers as spans of its
    text; dates, amounts, accounts and currencies among the values its scanners find."""
    squashed = _squash(text)
    found = document_candidates(text)
    for name in SPAN_FIELDS:
        value = fields.get(name)
        if value is not None and _squash(str(value)) not in squashed:
            return False
    for name in ("date", "currency", "amount", "account"):
        value = fields.get(name)
        if value is not None and value not in found[name]:
            return False
    return True
