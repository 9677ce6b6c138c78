"""Reading order of OCR text boxes (pipeline.ingest.ocr_layout): rows stay rows, a receipt's label keeps its
figures, and only prose set in two columns is read column by column."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.ingest.ocr_layout import TextBox, reading_order

H = 30.0  # line height in pixels


def box(x0: float, row: float, x1: float, text: str, dy: float = 0.0) -> TextBox:
    y = row * 40 + dy
    return TextBox(x0, y, x1, y + H, text)


def test_a_receipt_row_keeps_its_label_and_amount_together() -> None:
    boxes = [box(100, 0, 600, "KEDAI MAJU SDN BHD"), box(20, 1, 120, "Milo (B)"), box(400, 1, 700, "2x 2.80 5.60 SR"),
             box(20, 2, 160, "TOTAL"), box(550, 2, 700, "RM 33.92", dy=6), box(20, 3, 160, "CASH"),
             box(560, 3, 700, "RM 50.00")]
    assert reading_order(boxes).splitlines() == [
        "KEDAI MAJU SDN BHD", "Milo (B)  2x 2.80 5.60 SR", "TOTAL  RM 33.92", "CASH  RM 50.00"]


def test_a_table_of_short_cells_is_not_taken_for_columns() -> None:
    rows = [("Description", "Qty  Price"), ("Heineken bottle", "2  20.00"), ("Tiger can", "1  9.00"),
            ("Service charge", "1  2.90"), ("Grand total", "31.90")]
    boxes = [b for i, (left, right) in enumerate(rows) for b in (box(20, i, 300, left), box(500, i, 700, right))]
    assert reading_order(boxes).splitlines() == [f"{left}  {right}" for left, right in rows]


@given(st.lists(st.tuples(st.integers(0, 2), st.from_regex(r"[a-g]{1,6}( [a-g]{1,6})?", fullmatch=True)), min_size=1, max_size=12))
def test_every_box_text_comes_back_once(cells: list[tuple[int, str]]) -> None:
    boxes = [box(30 + 300 * col, i, 30 + 300 * col + 250, text) for i, (col, text) in enumerate(cells)]
    out = reading_order(boxes)
    assert sorted(out.replace("\n", "  ").split("  ")) == sorted(text for _, text in cells)


def test_two_prose_columns_are_read_left_column_first() -> None:
    left = ["The sequencer records each track", "in real time and corrects the", "timing of every note played by",
            "the musician while recording"]
    right = ["Songs are built from sequences", "that repeat any number of times", "and may be chained together",
             "with tempo changes between them"]
    boxes = [box(20, -1, 900, "The LinnSequencer brochure")]
    boxes += [b for i, (a, c) in enumerate(zip(left, right)) for b in (box(20, i, 440, a), box(470, i, 900, c, dy=4))]
    boxes += [box(20, len(left), 900, "Linn Electronics, Inc. Tarzana, California")]
    assert reading_order(boxes).splitlines() == [
        "The LinnSequencer brochure", *left, *right, "Linn Electronics, Inc. Tarzana, California"]
