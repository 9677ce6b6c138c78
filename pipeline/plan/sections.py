"""A long document cut into sections that each fit one model request, so the whole text is read.

    split_sections(text, budget, measure=len) -> list[Section]

Sections start where the document starts one: an item of an SEC form ("Item 1A. Risk Factors", "ITEM 7."), a part
("PART II"), a primary statement's title, or a heading line of a report ("Management's Discussion and Analysis",
"Notes to the Financial Statements", "Risk factors"). A section over `budget` (measured by `measure`: the model's
token count) is cut at its page markers (`[page N]`), then at line ends, then, for a single line longer than the
budget, inside the line. Sections tile the text exactly: joined in order they are the text, with nothing left out
and nothing read twice. Each knows the pages it spans and the heading it falls under.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.ingest.pdf_text import PAGE_MARK

_ITEM = re.compile(r"^(?:part\s+[ivx]+\s*[.,:—–-]?\s*)?item\s+(\d{1,2}[a-c]?)\b\.?", re.I)
_PART = re.compile(r"^part\s+([ivx]+)\b\.?(?:\s*[—–-]?\s*[a-z ]{0,60})?$", re.I)
_HEADING = re.compile(
    r"^(?:(?:condensed\s+)?(?:consolidated\s+)?(?:condensed\s+)?(?:statements?\s+of\s+[a-z ,()'’]+|balance\s+sheets?|"
    r"income\s+statements?)|notes?\s+to\s+(?:the\s+)?(?:condensed\s+)?(?:consolidated\s+)?financial\s+statements|"
    r"management['’]s\s+discussion\s+and\s+analysis[a-z ,]*|risk\s+factors|legal\s+proceedings|"
    r"subsequent\s+events?|summary|prospectus\s+summary|use\s+of\s+proceeds|dividend\s+policy|capitalization|"
    r"dilution|business|executive\s+compensation|principal\s+(?:stock|share)holders|description\s+of\s+[a-z ]+|"
    r"underwriting|legal\s+matters|experts|report\s+of\s+independent\s+registered\s+public\s+accounting\s+firm)"
    r"\s*(?:\((?:unaudited|continued)\))?\.?$", re.I)


@dataclass(frozen=True)
class Section:
    """`text[start:end]` of the document: its heading (the line that opened it, or the one it continues),
    the form item it belongs to ("1A", "7", or None) and the pages it spans (1-based)."""

    index: int
    start: int
    end: int
    title: str
    item: str | None
    page_start: int
    page_end: int


def _heading(line: str) -> tuple[str, str | None] | None:
    """(title, item) when `line` opens a section. Contents lines (a heading followed by a page number) do not."""
    line = line.strip()
    if not line or len(line) > 120 or re.search(r"\s\d{1,3}$", line):
        return None
    m = _ITEM.match(line)
    if m:
        return line, m.group(1).upper()
    if _PART.match(line) or _HEADING.match(line):
        return line, None
    return None


def _line_at(text: str, start: int) -> str:
    end = text.find("\n", start)
    return text[start:end if end >= 0 else len(text)]


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer(r"\n", text)]


def _pages(text: str) -> tuple[list[int], list[int]]:
    """Offsets where each page starts and the page numbers (page 1 starts at 0)."""
    offsets, numbers = [0], [1]
    for m in PAGE_MARK.finditer(text):
        offsets.append(m.start())
        numbers.append(int(m.group(1)))
    return offsets, numbers


RUNNING_HEADER_MIN = 3  # a heading line printed this often is the page header repeated, not a new section
MIN_SECTION_CHARS = 200  # a heading closer than this to the previous one does not open a section of its own
CHARS_PER_TOKEN_MAX = 16  # a cut looks this many characters per budget unit ahead at most (bounds the work)


def _cut(text: str, start: int, end: int, budget: int, measure: Callable[[str], int],
         levels: list[list[int]]) -> list[int]:
    """Cut points inside (start, end) so that every piece measures at most `budget`: at the farthest boundary of
    the first level (page starts, then line starts) that keeps the piece within budget; a line over budget is cut
    between characters."""
    cuts: list[int] = []
    pos = start
    while end - pos > budget * CHARS_PER_TOKEN_MAX or measure(text[pos:end]) > budget:
        limit = min(end, pos + budget * CHARS_PER_TOKEN_MAX)
        best = None
        for bounds in (*levels, range(pos + 1, limit + 1)):
            inside = bounds[bisect_right(bounds, pos):bisect_right(bounds, limit)]
            best = _farthest(text, pos, inside, budget, measure)
            if best is not None:
                break
        if best is None or best >= end:
            break
        cuts.append(best)
        pos = best
    return cuts


def _farthest(text: str, pos: int, candidates: list[int] | range, budget: int,
              measure: Callable[[str], int]) -> int | None:
    """The farthest candidate end whose piece `text[pos:end]` measures within budget (a piece only grows with its
    end), or None."""
    best = None
    lo, hi = 0, len(candidates) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if measure(text[pos:candidates[mid]]) <= budget:
            best, lo = candidates[mid], mid + 1
        else:
            hi = mid - 1
    return best


def split_sections(text: str, budget: int, measure: Callable[[str], int] = len) -> list[Section]:
    """The document's sections, in order, each measuring at most `budget` (see the module docstring)."""
    if budget < 1:
        raise ValueError(f"budget must be positive, got {budget}")
    if not text:
        return []
    starts = _line_starts(text)
    headings = [(s, h) for s in starts if (h := _heading(_line_at(text, s))) is not None]
    repeats = Counter(h[0].lower() for _, h in headings)
    opens: list[tuple[int, str, str | None]] = [(0, "", None)]
    item: str | None = None
    for s, (title, found_item) in headings:
        if repeats[title.lower()] >= RUNNING_HEADER_MIN:  # a page's running header, not a heading
            continue
        item = found_item if found_item is not None else (item if _HEADING.match(title) else None)
        if s == 0:
            opens[0] = (0, title, item)
        elif len(opens) > 1 and s - opens[-1][0] < MIN_SECTION_CHARS:  # a heading right after another (a part's
            opens[-1] = (opens[-1][0], title, item)  # title, a contents list) opens no section: the later one names it
        else:
            opens.append((s, title, item))
    page_offsets, page_numbers = _pages(text)
    line_set = starts[1:]
    out: list[Section] = []
    for n, (s, title, item_of) in enumerate(opens):
        e = opens[n + 1][0] if n + 1 < len(opens) else len(text)
        pages = [p for p in page_offsets if s < p < e]
        pieces = [s, *_cut(text, s, e, budget, measure, [pages, line_set]), e]  # no cut where the section fits
        for a, b in zip(pieces, pieces[1:]):
            if a == b:
                continue
            first = page_numbers[bisect_right(page_offsets, a) - 1]
            last = page_numbers[bisect_right(page_offsets, max(a, b - 1)) - 1]
            out.append(Section(len(out), a, b, title, item_of, first, last))
    return out
