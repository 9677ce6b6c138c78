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
            parts.append(f"[page {number}]")
        if page:
            parts.append(page)
    return "\n".join(parts)


def needs_ocr(pages: Sequence[str]) -> bool:
    """True when no page has a text layer (scanned/image-only PDF)."""
    return not any(_clean(p) for p in pages)
