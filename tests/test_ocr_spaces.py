"""Word spaces RapidOCR drops, put back from Tesseract's reading of the same lines (issue 38: "SANYUSTATIONERYSHOP"
cost the issuer of every receipt of that shop): only spaces are added, only between letters, and only where the
two readings agree."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.ocr import engine, ocr_pdf_pages
from pipeline.ingest.ocr_layout import TextBox
from pipeline.ingest.ocr_spaces import restore_spaces, spaced

needs_tesseract = pytest.mark.skipif(engine("tesseract") is None, reason="Tesseract not installed (scripts/setup.sh)")
RECEIPTS = Path(__file__).resolve().parents[2] / "shared" / "realdata" / "receipts"


@pytest.mark.parametrize(("rapid", "tesseract", "expected"), [
    ("SANYUSTATIONERYSHOP", "SANYO STATIONERY SHOP", "SANYU STATIONERY SHOP"),  # a letter misread: spaces kept
    ("KEDAIPAPAN-YEWCHUAN", "KEDAI PAPAN'YEW CHUAN", "KEDAI PAPAN-YEW CHUAN"),
    ("43200CHERASSELANGOR", "43200 CHERAS, SELANGOR", "43200CHERAS SELANGOR"),  # past the comma; never by a digit
    ("Telephone:03-41056485", "Telephone: 03- 41056485", "Telephone:03-41056485"),  # figures are never split
    ("LIGHTROOM GALLERY SDN BHD", "Lrg, Ly, s, 8", "LIGHTROOM GALLERY SDN BHD"),  # readings disagree: unchanged
    ("TAXINVOICE", "", "TAXINVOICE"),
    ("GROSSESTRASSEBAUMARKT", "GRO\u00dfE STRASSE BAUMARKT", "GROSSE STRASSE BAUMARKT"),  # "ß" lowers to one letter
])
def test_a_space_goes_only_between_letters_where_the_other_reading_has_one(rapid: str, tesseract: str,
                                                                         expected: str) -> None:
    assert spaced(rapid, tesseract) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_only_spaces_are_ever_added(rapid: str, other: str) -> None:
    out = spaced(rapid, other)
    assert out.replace(" ", "") == rapid.replace(" ", "")  # every character RapidOCR read, in its order
    assert len(out) - len(rapid) == out.count(" ") - rapid.count(" ") >= 0  # and only spaces more


@needs_tesseract
def test_a_glued_line_of_a_page_gets_its_spaces_back_and_other_lines_stay() -> None:
    from PIL import Image, ImageDraw, ImageFont

    page = Image.new("L", (900, 400), 255)
    ImageDraw.Draw(page).text((20, 115), "SANYU STATIONERY SHOP", font=ImageFont.load_default(size=40), fill=0)
    boxes = [TextBox(15, 110, 700, 170, "SANYUSTATIONERYSHOP"), TextBox(15, 300, 200, 330, "Total 12.00")]
    out, changed = restore_spaces(page, boxes)
    assert changed == 1 and [b.text for b in out] == ["SANYU STATIONERY SHOP", "Total 12.00"]
    assert [(b.x0, b.y0, b.x1, b.y1) for b in out] == [(b.x0, b.y0, b.x1, b.y1) for b in boxes]


@needs_tesseract
@pytest.mark.skipif(not RECEIPTS.is_dir(), reason="../shared/realdata/receipts is absent")
def test_a_real_receipts_shop_name_reads_with_its_spaces() -> None:
    if engine() == engine("tesseract"):
        pytest.skip("RapidOCR not installed: Tesseract reads the page itself")
    text = ocr_pdf_pages((RECEIPTS / "srcpt_472.pdf").read_bytes(), [1]).texts[1]
    assert "SANYU STATIONERY SHOP" in text and "SANYUSTATIONERYSHOP" not in text
