"""Reading order for text boxes found by a text-detection OCR model: boxes become lines, and a run of lines set in
two prose columns is read column by column.

Written here because the OCR library (RapidOCR) returns one box per printed text segment with no reading order,
and no well-kept library orders such boxes without a layout model of its own. The rule that tells columns from a
table: a receipt or invoice row ("TOTAL  RM 33.92", "Milo  2x 2.80 5.60") keeps its label and figures on one line,
because only a run of rows whose both sides read as prose (several words of letters) is taken for two columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WORD = re.compile(r"[^\W\d_]{2,}")
MIN_PROSE_WORDS = 3  # words of letters on each side of a gap for the row to read as two prose columns
MIN_COLUMN_ROWS = 3  # prose rows needed before a gutter is believed


@dataclass(frozen=True)
class TextBox:
    """One detected text segment: its axis-aligned extent in pixels and its text."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str

    @property
    def middle(self) -> float:
        return (self.y0 + self.y1) / 2

    @property
    def height(self) -> float:
        return max(self.y1 - self.y0, 1.0)


def rows_of(boxes: list[TextBox]) -> list[list[TextBox]]:
    """Boxes grouped into printed rows (top to bottom), each row left to right: a box joins the row above when its
    vertical middle lies within half a line height of the row's."""
    rows: list[list[TextBox]] = []
    for box in sorted(boxes, key=lambda b: b.middle):
        if rows:
            row = rows[-1]
            middle = sum(b.middle for b in row) / len(row)
            height = min(box.height, min(b.height for b in row))
            if abs(box.middle - middle) < 0.5 * height:
                row.append(box)
                continue
        rows.append([box])
    return [sorted(row, key=lambda b: b.x0) for row in rows]


def _prose(boxes: list[TextBox]) -> bool:
    return len(_WORD.findall(" ".join(b.text for b in boxes))) >= MIN_PROSE_WORDS


def _prose_gutters(row: list[TextBox]) -> list[float]:
    """x positions (gap middles) where the row splits into prose on both sides."""
    return [(row[i - 1].x1 + row[i].x0) / 2 for i in range(1, len(row))
            if row[i].x0 > row[i - 1].x1 and _prose(row[:i]) and _prose(row[i:])]


def _crosses(row: list[TextBox], x: float) -> bool:
    return any(b.x0 < x < b.x1 for b in row)


def _line(row: list[TextBox]) -> str:
    return "  ".join(b.text for b in row)


def reading_order(boxes: list[TextBox]) -> str:
    """The page's text, one printed row per line; a run of rows in two prose columns is read left column first."""
    rows = rows_of(boxes)
    gutters = [_prose_gutters(row) for row in rows]
    lines: list[str] = []
    i = 0
    while i < len(rows):
        block_end = i
        gutter = None
        for x in gutters[i]:
            end, prose_rows = i, 0
            while end < len(rows) and not _crosses(rows[end], x):
                prose_rows += any(abs(g - x) < rows[end][0].height * 2 for g in gutters[end])
                end += 1
            if prose_rows >= MIN_COLUMN_ROWS and end > block_end:
                block_end, gutter = end, x
        if gutter is None:
            lines.append(_line(rows[i]))
            i += 1
            continue
        block = rows[i:block_end]
        left = [[b for b in row if b.x1 <= gutter] for row in block]
        right = [[b for b in row if b.x0 >= gutter] for row in block]
        lines += [_line(row) for row in left if row] + [_line(row) for row in right if row]
        i = block_end
    return "\n".join(lines)
