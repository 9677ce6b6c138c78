"""A standalone e-invoice XML file (CII, UBL: XRechnung, Peppol, Factur-X's XML alone) dropped into the input
folder: one document, read from its XML exactly like the XML a hybrid PDF carries."""

from __future__ import annotations

from pipeline.errors import ErrorRecord, Stage, Unit
from pipeline.identity import sha256_bytes
from pipeline.ingest.einvoice import (
    MAX_XML_BYTES,
    _parse,
    einvoice_fields,
    is_einvoice_xml,
)
from pipeline.ingest.pdf import PdfDocument, clean_text, pdf_doc_error_id


def xml_text(xml: bytes) -> str:
    """The XML's text nodes, one per line: what the model reads when `--extraction model` asks it to."""
    root = _parse(xml)
    return "\n".join(t for t in (" ".join((node.text or "").split()) for node in root.iter()) if t)


def read_xml_document(data: bytes, source_file: str) -> PdfDocument | ErrorRecord:
    doc_id = sha256_bytes(data)

    def fail(cls: str, msg: str) -> ErrorRecord:
        return ErrorRecord(row_id=pdf_doc_error_id(doc_id), unit=Unit.DOCUMENT, source_file=source_file,
                           stage=Stage.INGEST, error_class=cls, message=msg)

    if len(data) > MAX_XML_BYTES:
        return fail("TooLarge", f"{len(data):,} bytes of XML, over the e-invoice limit of {MAX_XML_BYTES:,}")
    if not is_einvoice_xml(data):
        return fail("UnsupportedFormat", "an XML file that is neither a CII nor a UBL invoice or credit note")
    try:
        text = clean_text(xml_text(data))
    except Exception as exc:
        return fail("InvalidXML", f"the XML does not parse: {type(exc).__name__}: {exc}")
    if einvoice_fields(data) is None:
        return fail("UnreadableEInvoice", "an e-invoice XML whose type code is not an invoice or credit note, or "
                    "that lacks the seller, the issue date or another field the documents dataset requires")
    return PdfDocument(doc_id=doc_id, source_file=source_file, page_count=1, pages=[text], text=text,
                       needs_ocr=False, ocr_pages=[], encrypted=False, einvoice_name=source_file.rsplit("/", 1)[-1],
                       einvoice_xml=data)
