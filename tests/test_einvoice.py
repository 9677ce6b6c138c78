"""E-invoices: PDFs carrying ZUGFeRD / Factur-X / UBL XML are read from that XML exactly (extraction_method
embedded_xml), `--extraction model` sends them to the model, and hostile or non-invoice XML falls back to the
model instead of failing the document."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import RunConfig
from pipeline.ingest.einvoice import einvoice_fields, embedded_xml
from pipeline.output.sink import read_dataset
from pipeline.run import run_pipeline
from schemas import DocumentExtraction, arrow_values
from tests.helpers.einvoices import CII, EXPECTED, UBL, ZUGFERD1, einvoice_pdf
from tests.helpers.fake_llm import GOOD_DOCUMENT, FakeLLM
from tests.helpers.pipeline_inputs import make_pdf


@pytest.mark.parametrize("xml, name", [(CII, "factur-x.xml"), (ZUGFERD1, "ZUGFeRD-invoice.xml"),
                                       (UBL, "UBL-Invoice-2.1.xml")], ids=["cii", "zugferd1", "ubl"])
def test_header_fields_are_read_from_the_embedded_xml(tmp_path: Path, xml: str, name: str) -> None:
    pdf = einvoice_pdf(tmp_path / "inv.pdf", xml, name)
    found = embedded_xml(pdf.read_bytes())
    assert found is not None and found[0] == name
    assert einvoice_fields(found[1]) == EXPECTED


def test_pdf_without_attachment_has_no_einvoice(tmp_path: Path) -> None:
    assert embedded_xml(make_pdf(tmp_path / "p.pdf", ["Invoice 1"]).read_bytes()) is None
    assert embedded_xml(b"%PDF-1.4 garbage") is None


def test_non_invoice_or_incomplete_xml_is_left_to_the_model() -> None:
    assert einvoice_fields(b"<not-xml") is None
    assert einvoice_fields(b"<root/>") is None
    order = CII.replace("<ram:TypeCode>380</ram:TypeCode>", "<ram:TypeCode>220</ram:TypeCode>")  # an order
    assert einvoice_fields(order.encode()) is None
    no_date = CII.replace('<udt:DateTimeString format="102">20240305</udt:DateTimeString>', "")
    assert einvoice_fields(no_date.encode()) is None
    # an account the schema cannot hold drops that field, not the invoice
    bad_iban = CII.replace(EXPECTED["account"], "DE89 3704 0044 0532 0130 00 (Sparkasse)")
    assert einvoice_fields(bad_iban.encode()) == {**EXPECTED, "account": None}


def test_external_entities_are_not_resolved(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    xxe = CII.replace('<?xml version="1.0" encoding="UTF-8"?>',
                      f'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file://{secret}">]>')
    xxe = xxe.replace(f"<ram:Name>{EXPECTED['issuer']}</ram:Name>", "<ram:Name>&x;</ram:Name>", 1)
    fields = einvoice_fields(xxe.encode())
    assert fields is None or "TOP-SECRET" not in str(fields)


def _run(inputs: Path, out: Path, model: Path, **kw: object):
    cfg = RunConfig(input_dir=inputs, output_dir=out, model_dir=model, run_date="2024-05-01", progress=False, **kw)
    llm = FakeLLM()
    return run_pipeline(cfg, llm=llm), llm


def test_run_reads_einvoices_from_xml_and_the_rest_with_the_model(tmp_path: Path, fake_model: Path) -> None:
    inputs = tmp_path / "in"
    einvoice_pdf(inputs / "einvoice.pdf", CII)
    make_pdf(inputs / "plain.pdf", ["Invoice INV-1 from Example Supplies GmbH, total 100.50 EUR"])
    summary, llm = _run(inputs, tmp_path / "out", fake_model)
    rows = {r["source_file"]: r for r in read_dataset(tmp_path / "out", "documents").to_pylist()}
    assert summary.reconciliation["balanced"]
    assert sum(llm.calls) == 1  # only the plain PDF went to the model
    xml_row, model_row = rows["einvoice.pdf"], rows["plain.pdf"]
    assert xml_row["extraction_method"] == "embedded_xml" and xml_row["grounded"]
    assert {k: xml_row[k] for k in EXPECTED} == arrow_values(DocumentExtraction, EXPECTED)  # typed: date, decimal
    # each value's provenance is the XML element it was read from
    paths = {s["field"]: s["xml_path"] for s in xml_row["field_sources"]}
    assert set(paths) == {k for k, v in EXPECTED.items() if v is not None and k != "doc_type"}
    assert paths["amount"].endswith("/ram:GrandTotalAmount") and paths["issuer"].endswith("SellerTradeParty/ram:Name")
    assert paths["date"].endswith("/udt:DateTimeString") and all(s["page"] is None for s in xml_row["field_sources"])
    assert xml_row["prompt_tokens"] == 0 and xml_row["output_tokens"] == 0
    assert all(xml_row["field_confident"].values()) and not xml_row["needs_review"]  # read exactly
    assert model_row["extraction_method"] == "model"
    assert {k: model_row[k] for k in GOOD_DOCUMENT} == arrow_values(DocumentExtraction, GOOD_DOCUMENT)
    # a model row's provenance: the page and the characters each printed value was read from; the date the page
    # never prints has none
    sources = {s["field"]: s for s in model_row["field_sources"]}
    assert sources["amount"]["page"] == 1 and sources["amount"]["printed"] == "100.50"
    assert sources["issuer"]["printed"] == "Example Supplies GmbH" and "date" not in sources

    # a re-run finds both done; --extraction model is other work (new row ids) and asks the model for both
    again, llm2 = _run(inputs, tmp_path / "out", fake_model)
    assert sum(llm2.calls) == 0 and again.reconciliation["documents_skipped"] == 2
    forced, llm3 = _run(inputs, tmp_path / "out2", fake_model, extraction="model")
    assert sum(llm3.calls) == 2
    methods = sorted(r["extraction_method"] for r in read_dataset(tmp_path / "out2", "documents").to_pylist())
    assert methods == ["model", "model"]


# ------------------------------------------------------------------ every invoice and credit-note code (issue 38)

@pytest.mark.parametrize("code, doc_type", [("380", "invoice"), ("204", "invoice"), ("575", "invoice"),
                                            ("326", "invoice"), ("381", "credit_note"), ("261", "credit_note"),
                                            ("396", "credit_note")])
def test_every_untdid_1001_invoice_and_credit_note_code_is_read(code: str, doc_type: str) -> None:
    xml = CII.replace("<ram:TypeCode>380</ram:TypeCode>", f"<ram:TypeCode>{code}</ram:TypeCode>")
    assert einvoice_fields(xml.encode()) == {**EXPECTED, "doc_type": doc_type}


def test_an_xml_listed_only_in_af_under_any_name_is_found(tmp_path: Path) -> None:
    from tests.helpers.einvoices import af_only_pdf

    found = embedded_xml(af_only_pdf(tmp_path / "af.pdf", CII).read_bytes())
    assert found is not None and found[0] == "invoice-data.xml"
    assert einvoice_fields(found[1]) == EXPECTED


def test_a_non_standard_encoding_declaration_does_not_hide_the_invoice() -> None:
    xml = CII.replace('encoding="UTF-8"', 'encoding="UTF-8_W/O_BOM"')
    assert einvoice_fields(xml.encode()) == EXPECTED


def test_a_standalone_xml_einvoice_is_a_document_read_from_its_xml(tmp_path: Path, fake_model: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "xrechnung.xml").write_text(UBL, encoding="utf-8")
    (inputs / "order.xml").write_text("<Order><ID>1</ID></Order>", encoding="utf-8")  # not an e-invoice
    summary, llm = _run(inputs, tmp_path / "out", fake_model)
    rows = read_dataset(tmp_path / "out", "documents").to_pylist()
    assert summary.reconciliation["balanced"] and sum(llm.calls) == 0
    assert len(rows) == 1 and rows[0]["source_file"] == "xrechnung.xml"
    assert rows[0]["extraction_method"] == "embedded_xml" and {k: rows[0][k] for k in EXPECTED} == arrow_values(
        DocumentExtraction, EXPECTED)
    errors = read_dataset(tmp_path / "out", "errors").to_pylist()
    assert [e["source_file"] for e in errors] == ["order.xml"]


def test_run_reads_an_xml_listed_only_in_af(tmp_path: Path, fake_model: Path) -> None:
    from tests.helpers.einvoices import af_only_pdf

    inputs = tmp_path / "in"
    inputs.mkdir()
    af_only_pdf(inputs / "af.pdf", CII)
    summary, llm = _run(inputs, tmp_path / "out", fake_model)
    rows = read_dataset(tmp_path / "out", "documents").to_pylist()
    assert summary.reconciliation["balanced"] and sum(llm.calls) == 0
    assert rows[0]["extraction_method"] == "embedded_xml" and {k: rows[0][k] for k in EXPECTED} == arrow_values(
        DocumentExtraction, EXPECTED)
