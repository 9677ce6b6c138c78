"""Text of a PDF as the extraction model sees it (shared by ingestion and training).

pypdf's raw output varies in spacing; normalising it here (one space between words, no
blank lines, explicit page markers) keeps prompts short and makes training text and
pipeline text identical by construction.
"""

import re
from collections.abc import Sequence

from pypdf import PdfReader

TEXT_VERSION = "pdftext-v4"  # bump when the text a document yields changes: document row ids carry it (v2: OCR;
# v3: scans read at their own resolution, OSD's proposed turn checked by word confidence; v4: an HTML table cell's
# paragraphs stay on their row)

_HSPACE = re.compile(r"[ \t\u00a0]+")
PAGE_MARK = re.compile(r"^\[page (\d+)\]$", re.M)  # the line `join_pages` puts before each page after the first


def page_texts(reader: PdfReader) -> list[str]:
    """Extract the text of every page; a page without a text layer yields ''."""
    return [(page.extract_text() or "") for page in reader.pages]


def _clean(page: str) -> str:
    lines = (_HSPACE.sub(" ", line).strip() for line in page.splitlines())
    return "\n".join(line for line in lines if line)


def document_text(pages: Sequence[str]) -> str:
    """Join cleaned pages; pages after the first are introduced by a `[page N]` marker."""
    return join_pages([_clean(page) for page in pages])


def join_pages(pages: Sequence[str]) -> str:
    """One text of a document's pages, each page after the first introduced by a `[page N]` line (the marker
    section splitting and grounding read pages by)."""
    parts: list[str] = []
    for number, page in enumerate(pages, start=1):
        if number > 1:
            parts.append(f"[page {number}]")  # PAGE_MARK
        if page:
            parts.append(page)
    return "\n".join(parts)


def table_page_texts(data: bytes) -> list[str]:
    """Each page's text as PDFium orders it, for reading statement tables. pypdf emits a page's text in content-
    stream order, which for many printed filings interleaves a table's labels with the figures of the row above
    ("$ 39,403 $ 39,528 Cost of goods sold"); PDFium keeps each row's label and figures on one line. The document
    text the model reads stays pypdf's (the grounding was measured on it)."""
    import pypdfium2 as pdfium  # noqa: PLC0415 - loaded only for PDFs

    pdf = pdfium.PdfDocument(data)
    try:
        out = []
        for page in pdf:
            textpage = page.get_textpage()
            out.append(textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n"))
            textpage.close()
            page.close()
        return out
    finally:
        pdf.close()


def needs_ocr(pages: Sequence[str]) -> bool:
    """True when no page has a text layer (scanned/image-only PDF)."""
    return not any(_clean(p) for p in pages)
