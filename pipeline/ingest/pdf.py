"""PDF ingestion with pypdf: per-page text, page count, metadata, OCR flags, content-hash identity.

One PDF becomes either one `PdfDocument` or one `ErrorRecord`; nothing here raises for a bad file.
Page text and the joined document text come from `pipeline.ingest.pdf_text` (shared with training) so the
model sees text prepared exactly as in its training data.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pypdf
from pypdf import PdfReader

from pipeline.errors import ErrorRecord, Stage, Unit
from pipeline.identity import sha256_bytes, stable_id
from pipeline.ingest.einvoice import embedded_xml
from pipeline.ingest.pdf_text import document_text, page_texts, table_page_texts
from pipeline.ingest.statement_tables import statement_facts

_META_KEYS = {"title": "/Title", "author": "/Author", "creator": "/Creator", "producer": "/Producer",
              "creation_date": "/CreationDate"}

DOCUMENT_ARROW_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),  # sha256 of the file bytes
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("page_count", pa.int32(), nullable=False),
        pa.field("pages", pa.list_(pa.string()), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("needs_ocr", pa.bool_(), nullable=False),  # at least one page has no text layer
        pa.field("ocr_pages", pa.list_(pa.int32()), nullable=False),  # 1-based page numbers without text layer
        pa.field("ocred_pages", pa.list_(pa.int32()), nullable=False),  # of those, the pages whose text is OCR's
        pa.field("ocr_engine", pa.string()),  # e.g. "tesseract 5.3.0 (eng+deu)" when a page was OCRed
        pa.field("encrypted", pa.bool_(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("author", pa.string()),
        pa.field("creator", pa.string()),
        pa.field("producer", pa.string()),
        pa.field("creation_date", pa.string()),
        pa.field("einvoice_name", pa.string()),  # attachment name of an embedded e-invoice (pipeline.ingest.einvoice)
        pa.field("einvoice_xml", pa.binary()),  # its XML, as embedded
    ]
)


@dataclass
class PdfDocument:
    """One readable PDF document, ready for prompting."""

    doc_id: str
    source_file: str
    page_count: int
    pages: list[str]
    text: str
    needs_ocr: bool  # some page has no text: no text layer, and OCR did not read it
    ocr_pages: list[int]  # pages without a text layer
    encrypted: bool
    metadata: dict[str, str | None] = field(default_factory=dict)
    einvoice_name: str | None = None
    einvoice_xml: bytes | None = None
    ocred_pages: list[int] = field(default_factory=list)
    ocr_engine: str | None = None
    parts_not_read: list[str] = field(default_factory=list)  # an EDGAR submission's binaries and XBRL data files
    facts: list[Any] = field(default_factory=list)  # FilingFacts (pipeline.ingest.facts): inline XBRL or tables

    def as_row(self) -> dict[str, Any]:
        row = {k: getattr(self, k) for k in ("doc_id", "source_file", "page_count", "pages", "text", "needs_ocr",
                                             "ocr_pages", "ocred_pages", "ocr_engine", "encrypted", "einvoice_name",
                                             "einvoice_xml")}
        row.update({k: self.metadata.get(k) for k in _META_KEYS})
        return row


def documents_to_table(docs: list[PdfDocument]) -> pa.Table:
    """Arrow table with `DOCUMENT_ARROW_SCHEMA`."""
    return pa.Table.from_pylist([d.as_row() for d in docs], schema=DOCUMENT_ARROW_SCHEMA)


def clean_text(s: str) -> str:
    """Valid UTF-8 text: join surrogate pairs some PDFs produce, replace lone surrogates."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _page_texts(reader: Any) -> list[str]:
    return [clean_text(t) for t in page_texts(reader)]


def _document_text(pages: list[str]) -> str:
    return document_text(pages)


def _metadata(reader: Any) -> dict[str, str | None]:
    out: dict[str, str | None] = {k: None for k in _META_KEYS}
    try:
        meta = reader.metadata
    except Exception:  # broken info dictionaries are common and never fatal
        return out
    if not meta:
        return out
    for key, pdf_key in _META_KEYS.items():
        try:
            value = meta.get(pdf_key)
            if value is not None and hasattr(value, "get_object"):
                value = value.get_object()
            text = clean_text(str(value)).strip() if value is not None else ""
            out[key] = text or None
        except Exception:
            out[key] = None
    return out


def pdf_doc_error_id(doc_id: str) -> str:
    """Unit id of a PDF that failed before it had a document id of its own (same per content)."""
    return stable_id("pdf", doc_id)


def read_pdf(data: bytes, source_file: str, *, max_pages: int | None = None,
             max_text_chars: int | None = None, allow_no_text: bool = False) -> PdfDocument | ErrorRecord:
    """Parse one PDF's bytes. Encrypted files are opened with the empty password when that works. A PDF over
    `max_pages` is not extracted (TooManyPages); one whose text exceeds `max_text_chars` fails (TextTooLong).
    A PDF without any text layer is a NeedsOCR error, or with `allow_no_text` a document with empty text for OCR
    to fill in (`with_ocr`)."""

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    doc_id = sha256_bytes(data)

    def fail(cls: str, msg: str) -> ErrorRecord:
        return ErrorRecord(row_id=pdf_doc_error_id(doc_id), unit=Unit.DOCUMENT, source_file=source_file,
                           stage=Stage.INGEST, error_class=cls, message=msg)

    try:
        with _limits_for(data):
            return _read(data, source_file, doc_id, fail, max_pages, max_text_chars, allow_no_text)
    except Exception as exc:
        return fail("UnreadablePDF", f"pypdf could not read the file: {type(exc).__name__}: {exc}")


def _limits_for(data: bytes) -> contextlib.AbstractContextManager[object]:
    """pypdf's element-count guards scaled to the file: an array or dictionary in the file cannot hold more
    entries than the file has bytes, so counts up to that are legitimate (long filings exceed pypdf's fixed
    100,000); decompression stays bounded by pypdf's output limits."""
    bound = max(100_000, len(data))
    return pypdf.apply_configuration(array_maximum_element_count=bound, dictionary_maximum_element_count=bound)


def _read(data: bytes, source_file: str, doc_id: str, fail: Callable[[str, str], ErrorRecord],
          max_pages: int | None, max_text_chars: int | None, allow_no_text: bool) -> PdfDocument | ErrorRecord:
    reader = PdfReader(io.BytesIO(data), strict=False)
    encrypted = bool(reader.is_encrypted)
    if encrypted:
        try:
            ok = reader.decrypt("")
        except Exception as exc:  # e.g. missing crypto backend for AES
            return fail("EncryptedPDF", f"cannot decrypt with the empty password: {type(exc).__name__}: {exc}")
        if not ok:
            return fail("EncryptedPDF", "encrypted with a user password; the empty password does not open it")
    if max_pages is not None and len(reader.pages) > max_pages:
        return fail("TooManyPages", f"{len(reader.pages)} pages, over the limit of {max_pages} (max_pages)")
    pages = _page_texts(reader)
    if not pages:
        return fail("EmptyPDF", "the PDF has no pages")
    ocr_pages = [i + 1 for i, p in enumerate(pages) if not p.strip()]
    text = clean_text(_document_text(pages))
    if max_text_chars is not None and len(text) > max_text_chars:
        return fail("TextTooLong", f"{len(text):,} characters of text, over the limit of {max_text_chars:,} "
                    "(max_text_chars)")
    if not text.strip() and not allow_no_text:
        return needs_ocr_error(doc_id, source_file, f"no text layer on any of {len(pages)} page(s); OCR is required")
    einvoice = embedded_xml(data) if _has_attachments(reader) else None
    return PdfDocument(doc_id=doc_id, source_file=source_file, page_count=len(pages), pages=pages, text=text,
                       needs_ocr=bool(ocr_pages), ocr_pages=ocr_pages, encrypted=encrypted, metadata=_metadata(reader),
                       einvoice_name=einvoice[0] if einvoice else None, einvoice_xml=einvoice[1] if einvoice else None,
                       facts=_statement_facts(data, encrypted, pages))


def _statement_facts(data: bytes, encrypted: bool, pages: list[str]) -> list[Any]:
    """The statements' facts, read from PDFium's text of the pages (pdf_text.table_page_texts), or from pypdf's
    `pages` where PDFium cannot open the file (an encrypted one, opened by pypdf with the empty password)."""
    if not encrypted:
        try:
            return statement_facts(table_page_texts(data))
        except Exception:  # noqa: BLE001 - PDFium refusing a file pypdf reads: pypdf's text instead
            pass
    return statement_facts(pages)


def needs_ocr_error(doc_id: str, source_file: str, message: str) -> ErrorRecord:
    return ErrorRecord(row_id=pdf_doc_error_id(doc_id), unit=Unit.DOCUMENT, source_file=source_file,
                       stage=Stage.INGEST, error_class="NeedsOCR", message=message)


def with_ocr(doc: PdfDocument, texts: dict[int, str], engine: str | None, why_not: str | None = None
             ) -> PdfDocument | ErrorRecord:
    """The document with OCR's text on its pages without a text layer; a NeedsOCR error (saying `why_not`, or
    that OCR found nothing) when the document still has no text at all."""
    pages = [clean_text(texts[n]) if n in texts and not p.strip() else p for n, p in enumerate(doc.pages, start=1)]
    ocred = sorted(n for n in texts if n in doc.ocr_pages)
    text = clean_text(_document_text(pages))
    if not text.strip():
        reason = why_not or "OCR found no text on them"
        return needs_ocr_error(doc.doc_id, doc.source_file,
                               f"no text layer on any of {doc.page_count} page(s), and {reason}")
    return replace(doc, pages=pages, text=text, ocred_pages=ocred, ocr_engine=engine if ocred else None,
                   needs_ocr=any(n not in ocred for n in doc.ocr_pages))


def _has_attachments(reader: Any) -> bool:
    """Whether the PDF embeds files at all, in the EmbeddedFiles name tree or in the catalog's or a page's /AF
    array (the e-invoice lookup parses the file again, so skip it when not)."""
    try:
        if reader.attachments:
            return True
    except Exception:
        pass
    try:
        return any(holder.get("/AF") is not None for holder in [reader.trailer["/Root"], *reader.pages])
    except Exception:
        return False
