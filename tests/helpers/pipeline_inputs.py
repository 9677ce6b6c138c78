"""Small synthetic pipeline inputs built in temp dirs: PDFs (text, encrypted, image-only, corrupt)
and transaction logs in several dialects. Content is made up here, never copied from realdata."""

from __future__ import annotations

import io
from pathlib import Path


def make_pdf(path: Path, pages: list[str], title: str | None = None, page_format: str | tuple[float, float] = "A4"
             ) -> Path:
    """Text pages; an empty string is a page with a drawing and no text layer (`page_format`: fpdf2's, in mm)."""
    from fpdf import FPDF

    pdf = FPDF(format=page_format)
    pdf.set_font("helvetica", size=11)
    if title:
        pdf.set_title(title)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 6, text)
        else:
            pdf.rect(pdf.l_margin, pdf.t_margin, min(50, pdf.epw), min(30, pdf.eph), style="F")  # no text layer
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def encrypt_pdf(src: Path, dst: Path, user_password: str = "") -> Path:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(src).pages:
        writer.add_page(page)
    writer.encrypt(user_password=user_password, owner_password="owner-secret", algorithm="RC4-128")
    buf = io.BytesIO()
    writer.write(buf)
    dst.write_bytes(buf.getvalue())
    return dst


INVOICE_TEXT = (
    "INVOICE INV-2024-{n:04d}\nIssuer: Example Supplies GmbH\nCustomer: Test Customer AG\n"
    "Date: 2024-03-{d:02d}\nTotal due: {amt} EUR\nIBAN: DE02120300000000202051\n"
)


def write_sample_inputs(root: Path, n_pdfs: int = 3) -> dict[str, int]:
    """A mixed input folder; returns expected counts for reconciliation tests."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n_pdfs):
        make_pdf(root / "docs" / f"invoice_{i}.pdf", [INVOICE_TEXT.format(n=i, d=i + 1, amt=f"{100 + 17 * i}.50")])
    # image-only -> NeedsOCR error; a business-card-sized page, since OCR's time grows with the pixels it scans
    make_pdf(root / "docs" / "scan.pdf", [""], page_format=(85, 55))
    (root / "docs" / "broken.pdf").write_bytes(b"%PDF-1.4\n garbage without objects")
    (root / "logs").mkdir(exist_ok=True)
    (root / "logs" / "de_bank.csv").write_text(
        "Buchungstag;Betrag;Waehrung;Empfänger;Verwendungszweck\n"
        "01.02.2024;-1.234,50;EUR;Stadtwerke;Strom Februar\n"
        "15.02.2024;2.500,00;EUR;Arbeitgeber GmbH;Gehalt\n"
        "31.02.2024;-10,00;EUR;Kaputt;invalid date\n"
        "03.03.2024;-45,99;EUR;Buchladen;Bücher\n",
        encoding="cp1252",
    )
    (root / "logs" / "us_card.jsonl").write_text(
        '{"date": "2024-02-03", "amount": -12.5, "currency": "USD", "payee": "Coffee", "memo": "latte"}\n'
        "not json\n"
        '{"date": "2024-02-04", "amount": 100, "currency": "USD", "payee": "Refund", "memo": "return"}\n'
    )
    (root / "notes.rtf").write_text("{\\rtf1 not an input we ingest}\n")
    return {"files": n_pdfs + 5, "pdf_ok": n_pdfs, "pdf_errors": 2, "tx_rows": 5, "tx_row_errors": 2,
            "unsupported": 1}
