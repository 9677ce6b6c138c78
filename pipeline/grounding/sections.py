"""A section's summary is chosen from what the section says: candidate sentences, the model picks.

A small model asked to write a summary of a filing's section writes plausible text that the section does not say
(dates, item numbers and figures of its own). As with a document's fields, the decoding schema is narrowed to
candidates the text holds: `summary` to one of the section's sentences, `key_points` to its sentences and short
standalone lines (a risk factor's title is one). The model still decides which sentences carry the section; it can
no longer state what the section does not.

Sentences come from pySBD (rule-based boundaries that know "Inc.", "U.S." and decimal points); the lines a PDF
wraps inside a paragraph are joined first, and lines that are table rows (mostly figures) are not prose.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pysbd

from pipeline.ingest.pdf_text import PAGE_MARK

MAX_SUMMARY_CHARS = 400  # SectionSummary.summary
MAX_POINT_CHARS = 160  # one key point
MAX_CANDIDATES = 64  # per enum (pipeline.grounding.schema caps document enums alike)

_FIGURES_AT_END = re.compile(r"(?:\s+[$€£¥]?\s*\(?-?\d[\d,.]*\s*\)?%?|\s+[—–-]){2,}\s*$")


@dataclass(frozen=True)
class SectionCandidates:
    summary: tuple[str, ...]
    points: tuple[str, ...]


def _is_table_row(line: str) -> bool:
    """A row of a table: a label and two or more figures (or dashes) at the end."""
    return bool(_FIGURES_AT_END.search(" " + line))


@lru_cache(maxsize=1)
def _segmenter() -> pysbd.Segmenter:
    return pysbd.Segmenter(language="en", clean=False)


def _prose(text: str) -> tuple[str, list[str]]:
    """The section's prose with wrapped lines joined, and its short standalone lines (headings, titles)."""
    paragraphs: list[list[str]] = [[]]
    short: list[str] = []
    lines = [raw.strip() for raw in text.splitlines()]
    seen = Counter(lines)
    for line in lines:
        # a short line printed more than once is the page's running header ("PART I Item 2"), not prose
        if not line or PAGE_MARK.fullmatch(line) or _is_table_row(line) or (seen[line] > 1 and len(line.split()) <= 8):
            paragraphs.append([])
            continue
        words = len(line.split())
        if 3 <= words <= 25 and len(line) <= MAX_POINT_CHARS and not re.search(r"\s\d{1,3}$", line):
            short.append(line)
        paragraphs[-1].append(line)
    return "\n".join(" ".join(p) for p in paragraphs if p), short


def _sentence_ok(s: str) -> bool:
    words = s.split()
    letters = sum(c.isalpha() for c in s)
    return 6 <= len(words) <= 80 and len(s) <= MAX_SUMMARY_CHARS and letters >= 0.6 * len(s)


def _spread(values: list[str], cap: int) -> list[str]:
    """At most `cap` values, kept in order and spread over the whole section (not only its start)."""
    if len(values) <= cap:
        return values
    step = len(values) / cap
    return [values[int(i * step)] for i in range(cap)]


def section_candidates(text: str) -> SectionCandidates:
    """The sentences a summary may be, and the items a key point may be (first line as a fallback for a section
    without prose, such as a statement)."""
    prose, short = _prose(text)
    sentences: list[str] = []
    for piece in _segmenter().segment(prose) if prose else []:
        s = " ".join(piece.split())
        if _sentence_ok(s) and s not in sentences:
            sentences.append(s)
    points = list(dict.fromkeys([s for s in sentences if len(s) <= MAX_POINT_CHARS] + short))
    if not sentences:
        first = next((line.strip() for line in text.splitlines() if line.strip() and not PAGE_MARK.fullmatch(
            line.strip())), "")
        sentences = [first[:MAX_SUMMARY_CHARS]] if first else []
    return SectionCandidates(tuple(_spread(sentences, MAX_CANDIDATES)), tuple(_spread(points, MAX_CANDIDATES)))


def grounded_section_schema(schema: dict[str, Any], text: str) -> dict[str, Any]:
    """Copy of the section decoding schema whose summary is one of the section's sentences and whose key points
    are among its candidate items (none where it has none)."""
    c = section_candidates(text)
    out = copy.deepcopy(schema)
    if c.summary:
        out["properties"]["summary"] = {"type": "string", "enum": list(c.summary)}
    points = out["properties"]["key_points"]
    if c.points:
        points["items"] = {"type": "string", "enum": list(c.points)}
    else:
        points["maxItems"] = 0
    return out
