"""Scan-like PDFs made up in temp dirs: text typeset by fpdf2, rendered to an image, saved as an image-only page."""

from __future__ import annotations

import io
from pathlib import Path

LINES = ["RECHNUNG Nr. 2024-0117", "Stadtwerke Musterstadt GmbH", "Gesamtbetrag 1.234,56 EUR"]


def image_only_pdf(path: Path, lines: list[str], rotate: int = 0, text_page: str | None = None,
                   page_format: str | tuple[float, float] = (105, 148)) -> Path:
    """A scan-like PDF: text typeset by fpdf2, rendered to an image, the image saved as a PDF page (no text layer);
    `text_page` adds a first page that does have a text layer. A6 by default (105 x 148 mm, a receipt's size): OCR
    reads it in about a quarter of an A4 page's time, which counts where a turned page is read four times."""
    import pypdfium2 as pdfium
    from fpdf import FPDF

    doc = FPDF(format=page_format)
    doc.add_page()
    doc.set_font("Helvetica", size=16)
    for line in lines:
        doc.cell(0, 12, line, new_x="LMARGIN", new_y="NEXT")
    image = pdfium.PdfDocument(bytes(doc.output()))[0].render(scale=200 / 72).to_pil().convert("L")
    image = image.rotate(rotate, expand=True) if rotate else image
    buf = io.BytesIO()
    image.save(buf, format="PDF", resolution=200)
    scan = buf.getvalue()
    if text_page is None:
        path.write_bytes(scan)
        return path
    from pypdf import PdfReader, PdfWriter

    first = FPDF()
    first.add_page()
    first.set_font("Helvetica", size=12)
    first.cell(0, 10, text_page)
    writer = PdfWriter()
    for data in (bytes(first.output()), scan):
        for page in PdfReader(io.BytesIO(data)).pages:
            writer.add_page(page)
    with open(path, "wb") as f:
        writer.write(f)
    return path
