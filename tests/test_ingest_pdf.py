"""PDF ingestion: text, metadata, encryption, image-only pages, corrupt files, real-world edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import ErrorRecord
from pipeline.ingest.pdf import PdfDocument, read_pdf
from tests.helpers.pipeline_inputs import encrypt_pdf, make_pdf

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"


def _read(path: Path) -> PdfDocument | ErrorRecord:
    return read_pdf(path.read_bytes(), path.name)


def test_text_pdf_pages_metadata_and_content_hash(tmp_path: Path) -> None:
    p = make_pdf(tmp_path / "a.pdf", ["Invoice INV-7 total 12.50 EUR", "Second page text"], title="My Invoice")
    doc = _read(p)
    assert isinstance(doc, PdfDocument)
    assert doc.page_count == 2 and not doc.needs_ocr and doc.ocr_pages == []
    assert "INV-7" in doc.pages[0] and "Second page" in doc.text
    assert doc.metadata["title"] == "My Invoice"
    copy = tmp_path / "b.pdf"
    copy.write_bytes(p.read_bytes())
    assert _read(copy).doc_id == doc.doc_id  # identity is the content, not the path


def test_partially_scanned_document_is_flagged(tmp_path: Path) -> None:
    doc = _read(make_pdf(tmp_path / "m.pdf", ["text page", "", "more text"]))
    assert isinstance(doc, PdfDocument)
    assert doc.needs_ocr and doc.ocr_pages == [2]


def test_image_only_pdf_is_an_error_row(tmp_path: Path) -> None:
    err = _read(make_pdf(tmp_path / "scan.pdf", [""]))
    assert isinstance(err, ErrorRecord) and err.error_class == "NeedsOCR" and err.source_file == "scan.pdf"


def test_encrypted_with_empty_password_opens(tmp_path: Path) -> None:
    src = make_pdf(tmp_path / "plain.pdf", ["Secret statement 99.00"])
    doc = _read(encrypt_pdf(src, tmp_path / "enc.pdf", user_password=""))
    assert isinstance(doc, PdfDocument) and doc.encrypted and "Secret statement" in doc.text


def test_encrypted_with_user_password_is_an_error_row(tmp_path: Path) -> None:
    src = make_pdf(tmp_path / "plain.pdf", ["Secret"])
    err = _read(encrypt_pdf(src, tmp_path / "enc.pdf", user_password="hunter2"))
    assert isinstance(err, ErrorRecord) and err.error_class == "EncryptedPDF"


@pytest.mark.parametrize("payload", [b"%PDF-1.4\nnot really", b"", b"\x00\x01garbage"])
def test_corrupt_files_never_raise(tmp_path: Path, payload: bytes) -> None:
    p = tmp_path / "bad.pdf"
    p.write_bytes(payload)
    err = _read(p)
    assert isinstance(err, ErrorRecord) and err.stage == "ingest"


@pytest.mark.skipif(not (REALDATA / "pdf_edge").is_dir(), reason="shared/realdata/pdf_edge is absent on this machine")
def test_realdata_pdf_edge_cases() -> None:
    small = {"enc_r4-aes128_user-pw.pdf": "EncryptedPDF", "scan_linn-brochure_image-only.pdf": "NeedsOCR",
             "scan_huck-finn-page_image-only.pdf": "NeedsOCR"}
    opened = ["enc_r2-rc4-40_empty-user-pw.pdf", "corrupt_xref-prev-loop_30-pages.pdf",
              "corrupt_zen-of-python_broken-xref.pdf", "rot_mixed-per-page.pdf", "cjk_japanese_jo_dvipdfm.pdf"]
    for name, cls in small.items():
        res = _read(REALDATA / "pdf_edge" / name)
        assert isinstance(res, ErrorRecord) and res.error_class == cls, name
    for name in opened:
        res = _read(REALDATA / "pdf_edge" / name)
        assert isinstance(res, PdfDocument) and res.text.strip(), name
    assert _read(REALDATA / "pdf_edge" / "enc_r2-rc4-40_empty-user-pw.pdf").encrypted


def test_a_large_legitimate_array_reads(tmp_path: Path) -> None:
    """pypdf refuses arrays over 100,000 elements by default (a guard against malicious files); long 10-Qs carry
    such arrays (two of the docugami MSFT filings). The guard scales with the file instead: an array cannot hold
    more elements than the file has bytes."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import ArrayObject, NameObject, NumberObject

    src = make_pdf(tmp_path / "a.pdf", ["Total revenue 56,517"])
    writer = PdfWriter(clone_from=PdfReader(src))
    writer.pages[0][NameObject("/PieceInfo")] = ArrayObject(NumberObject(i % 10) for i in range(150_000))
    big = tmp_path / "big.pdf"
    with big.open("wb") as fh:
        writer.write(fh)
    doc = _read(big)
    assert isinstance(doc, PdfDocument), doc
    assert "56,517" in doc.text
