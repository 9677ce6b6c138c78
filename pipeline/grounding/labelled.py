"""Which label each printed value sits under: the same line after its label ("Invoice date: 3/28/2018"), the line
below a label that has no value of its own ("Montant total\\n62,86 €"), the value glued in front of its label by text
extraction, or the column under its label when a row of labels heads a row of values ("Invoice Number Invoice
Date ... \\n 458176 3/28/2018 ..."). The text is what `pipeline.ingest.pdf_text` or OCR produced, one printed line per line;
no coordinates are needed for these four layouts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.grounding.labels import (
    NEGATIVE,
    STRONG,
    WEAK,
    LabelHit,
    any_label_spans,
    label_hits,
)

Spans = Callable[[str], list[tuple[int, int, str]]]
"""A scanner: (start, end, canonical value) of each value of one kind in a line."""

_FILLER = re.compile(r"^[\s:.#\-=*|\u2013\u2014>\u00bb()\[\]]*$")
_LOOKAHEAD_LINES = 1  # a label that ends its line takes the value on the next line (further down: an address)


@dataclass(frozen=True)
class Located:
    """One printed value and the label it sits under (tier None: no label of this field)."""

    value: str
    tier: str | None
    line: int  # 0-based line number in the text
    start: int  # character offset in the text


def _between_is_filler(line: str, start: int, end: int, scanned: list[tuple[int, int, str]]) -> bool:
    """Nothing but punctuation, currency signs and spaces between a label and a value (no other value)."""
    gap = line[start:end]
    if any(start <= s < end for s, _, _ in scanned):
        return False
    gap = re.sub(r"@?\s*\d{1,2}(?:[.,]\d{1,2})?\s*%", " ", gap)  # a tax rate between label and value: "GST 6%"
    gap = re.sub(r"(?i)\b(?:gst|vat|tax|sst)\w{0,4}", " ", gap)  # "GST@6%" as OCR reads it: "GSTR6Z", "GSTa6X"
    gap = re.sub(r"[A-Z]{3}|[^\w\s]|\b(?:in|of|the|amount|rm|rs|inr|usd|eur)\b", " ", gap, flags=re.I)
    return len(gap.strip()) <= 12 and not re.search(r"\d", gap)


def _is_header_row(line: str, scanned: list[tuple[int, int, str]], doc_type: str | None) -> bool:
    """A row of two or more labels and no value of this kind: the next line is likely its row of values."""
    spans = any_label_spans(line, doc_type)
    if len(spans) < 2 or scanned:
        return False
    covered = sum(e - s for s, e in spans)
    letters = len(re.sub(r"[\W\d_]", "", line))
    return covered >= 0.5 * max(1, letters)


_ITEM_COLUMNS = re.compile(r"(?i)^(?:unit\s+price|price|qty|quantity|rate|pcs)$")


def _item_table(hits: list[LabelHit]) -> bool:
    """Whether a header row heads line items (a quantity or unit-price column): its "Total" column holds line
    totals, not the document's."""
    return any(h.tier == NEGATIVE and _ITEM_COLUMNS.match(h.text) for h in hits)


def _columns(header: str, hits: list[LabelHit], row: str, values: list[tuple[int, int, str]]
             ) -> list[tuple[int, str]]:
    """(value start, label tier) for a row of values under a row of labels. Text extraction keeps the columns'
    order but not their widths, so each label takes the value at the nearest relative position along the line
    (the last label, often the total, the last value), and a value claimed by two labels goes to the nearer."""
    if not values:
        return []

    def frac(a: int, b: int, n: int) -> float:
        return (a + b) / 2 / max(1, n)

    best: dict[int, tuple[float, str]] = {}
    for hit in hits:
        where = frac(hit.start, hit.end, len(header))
        start, end, _ = min(values, key=lambda v: abs(frac(v[0], v[1], len(row)) - where))
        distance = abs(frac(start, end, len(row)) - where)
        if start not in best or distance < best[start][0]:
            best[start] = (distance, hit.tier)
    return [(start, tier) for start, (_, tier) in best.items()]


def line_starts(lines: list[str]) -> list[int]:
    """Where each of `text.splitlines()` starts in the text (a `Located.start` less its line's start is its column)."""
    out = [0]
    for line in lines:
        out.append(out[-1] + len(line) + 1)
    return out


def locate(text: str, field: str, scan: Spans, doc_type: str | None = None) -> list[Located]:
    """Every value `scan` finds in `text`, each with the tier of the label of `field` it sits under (the labels
    of `doc_type`, when known, taking precedence: `pipeline.grounding.labels.TYPE_LABELS`)."""

    def _line_labels(line: str, field: str) -> list[LabelHit]:
        return label_hits(line, field, doc_type)

    lines = text.splitlines()
    offsets = line_starts(lines)
    scanned = [scan(line) for line in lines]
    # (line, start) -> tier; a label on the value's own line beats one above it (a header row's column, a label
    # ending the line above): "BILL TO Invoice No:" heads the next line, whose own "Invoice Date:" labels its date
    own: dict[tuple[int, int], str] = {}
    above: dict[tuple[int, int], str] = {}

    def tag(i: int, start: int, tier: str, same_line: bool = True) -> None:
        (own if same_line else above).setdefault((i, start), tier)

    for i, line in enumerate(lines):
        hits = _line_labels(line, field)
        values = scanned[i]
        if _is_header_row(line, values, doc_type) and hits and i + 1 < len(lines):
            if not _item_table(hits):
                for start, tier in _columns(line, hits, lines[i + 1], scanned[i + 1]):
                    tag(i + 1, start, tier, same_line=False)
            continue
        for hit in hits:
            # a strong label nearer the value is its own ("CASHIER C/N No: LCN00211": the credit note's number); a
            # weak "No." after a label is that label's ("Tel No.", "GST Reg. No")
            after = [v for v in values if v[0] >= hit.end and _between_is_filler(line, hit.end, v[0], values)
                     and not any(hit.end <= h.start < v[0] and h.tier == STRONG for h in hits)]
            if after:
                # and a reading inside a space-grouped one: "150 750.00" is 150750.00, or a quantity and 750.00
                first_start, first_end, _ = after[0]
                tag(i, first_start, hit.tier)
                for start, _, _ in values:
                    if first_start <= start < first_end and " " in line[first_start:start]:
                        tag(i, start, hit.tier)
                continue
            before = [v for v in values if v[1] <= hit.start and _between_is_filler(line, v[1], hit.start, values)]
            if before and not _line_labels(line[:before[-1][0]], field):
                tag(i, before[-1][0], hit.tier)  # "29,99 € TTC", "993548900Factuurnummer:"
                continue
            if _FILLER.match(line[hit.end:]) and hit.tier != WEAK:  # the label ends its line: its value is below
                # (not for a weak label: a title "INVOICE" ending a line does not label the street number below)
                for j in range(i + 1, min(len(lines), i + 1 + _LOOKAHEAD_LINES)):
                    if scanned[j]:
                        if len(any_label_spans(line, doc_type)) >= 2 and len(scanned[j]) >= 2:  # one column of a header row
                            if not _item_table(hits):
                                for start, tier in _columns(line, [hit], lines[j], scanned[j]):
                                    tag(j, start, tier, same_line=False)
                        elif not _line_labels(lines[j][:scanned[j][0][0]], field):
                            tag(j, scanned[j][0][0], hit.tier, same_line=False)
                        break
    out = []
    for i, values in enumerate(scanned):
        for start, _, value in values:
            out.append(Located(value, own.get((i, start), above.get((i, start))), i, offsets[i] + start))
    return out
