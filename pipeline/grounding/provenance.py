"""Where each value of a documents row was printed: page, character span within that page, and the characters as
printed ("1.234,50" for the amount 1234.50), or the XML element of an e-invoice value.

    text_sources(fields, text) -> list[FieldSource]   (one per field the text prints the value of)

A value is looked up the way grounding found it: a reference, date or amount among the values its scanner reads
from each line, the occurrence under the field's label first (pipeline.grounding.labelled.locate), else the first
printed; a currency among the printed codes and symbols; names verbatim; an account with the spaces it is printed
with. A value the text does not print (a currency inferred from the country, an amount the page's arithmetic
proves) has no source: nothing is pointed at that was not read there. Offsets count characters of the page's text
as the model read it (pipeline.ingest.pdf_text: lines stripped, blank lines dropped; OCR's text for a scan;
instruction-like passages removed: pipeline.grounding.injection).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipeline.grounding._common import LABELLED_TIERS
from pipeline.grounding.amounts import currency_spans
from pipeline.grounding.choices import document_choices
from pipeline.grounding.labelled import Spans, locate
from pipeline.ingest.pdf_text import PAGE_MARK

SOURCE_FIELDS = ("issuer", "counterparty", "reference", "date", "currency", "amount", "account")
"""Fields whose value can be pointed at; doc_type is a reading of the whole page, not a printed value."""


SOURCE_TYPE = pa.struct([pa.field("field", pa.string(), nullable=False), pa.field("page", pa.int32()),
                         pa.field("char_start", pa.int64()), pa.field("char_end", pa.int64()),
                         pa.field("printed", pa.string()), pa.field("xml_path", pa.string())])
"""One FieldSource in the documents dataset's `field_sources` list."""


@dataclass(frozen=True)
class FieldSource:
    field: str
    page: int | None = None  # 1-based
    char_start: int | None = None  # offsets into that page's text
    char_end: int | None = None
    printed: str | None = None  # the characters at that span
    xml_path: str | None = None  # an e-invoice value's element (lxml path)

    def as_row(self) -> dict[str, Any]:
        return {"field": self.field, "page": self.page, "char_start": self.char_start, "char_end": self.char_end,
                "printed": self.printed, "xml_path": self.xml_path}


def _page_of(text: str) -> Callable[[int], tuple[int, int]]:
    """offset -> (page number, offset of that page's first character)."""
    starts, numbers = [0], [1]
    for m in PAGE_MARK.finditer(text):
        starts.append(m.end() + 1)  # the page's text begins on the line after its marker
        numbers.append(int(m.group(1)))

    def page_of(offset: int) -> tuple[int, int]:
        i = max(j for j, s in enumerate(starts) if s <= offset)
        return numbers[i], starts[i]
    return page_of


def _scanned(text: str, field: str, value: str, scan: Spans, doc_type: str | None) -> tuple[int, int] | None:
    """(start, end) in `text` of the printed occurrence of `value` among what `scan` reads: under the field's
    strongest label, else the first."""
    spans: list[tuple[int, int]] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        spans += [(offset + s, offset + e) for s, e, v in scan(line.rstrip("\n")) if v == value]
        offset += len(line)
    if not spans:
        return None
    rank = {f.start: LABELLED_TIERS.index(f.tier) for f in locate(text, field, scan, doc_type)
            if f.value == value and f.tier in LABELLED_TIERS}  # under a strong label, then a weak one
    return min(spans, key=lambda s: (rank.get(s[0], len(LABELLED_TIERS)), s[0]))


def _verbatim(text: str, value: str) -> tuple[int, int] | None:
    i = text.find(value)
    return (i, i + len(value)) if i >= 0 else None


def _account(text: str, value: str) -> tuple[int, int] | None:
    """An IBAN or account number as printed: in groups ("DE89 3704 0044 ...") or not, any case."""
    m = re.search(r"\s?".join(map(re.escape, value)), text, re.I)
    return (m.start(), m.end()) if m else None


def text_sources(fields: dict[str, Any], text: str) -> list[FieldSource]:
    """The printed place of each value of `fields` (the model's JSON-mode values) in the document `text`."""
    choices = document_choices(text)
    kind = choices.fields["doc_type"]
    doc_type = kind.values[0] if kind.decided else None
    scanners = choices.scanners()
    page_of = _page_of(text)
    out = []
    for name in SOURCE_FIELDS:
        value = fields.get(name)
        if value is None:
            continue
        value = str(value)
        if name in scanners:
            span = _scanned(text, name, value, scanners[name], doc_type)
        elif name == "currency":
            span = next(((s, e) for s, e, code in currency_spans(text, choices.country) if code == value), None)
        elif name == "account":
            span = _account(text, value)
        else:
            span = _verbatim(text, value)
        if span is None:
            continue
        page, page_start = page_of(span[0])
        out.append(FieldSource(name, page, span[0] - page_start, span[1] - page_start, text[span[0]:span[1]]))
    return out
