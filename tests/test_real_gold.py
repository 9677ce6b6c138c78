"""`pipeline eval --gold DIR`: real gold formats (invoice2data lists, ZUGFeRD header JSON) mapped onto the documents
fields, their comparison rules, and the e-invoice path scored end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.evaluate import DEMO_MODEL_DIR, run_eval
from eval.real_gold import field_matches, issuer_matches, load_gold_dir
from tests.helpers.einvoices import CII, EXPECTED, einvoice_pdf
from tests.helpers.pipeline_inputs import make_pdf

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata" / "invoices"


def test_issuer_match_allows_a_short_label_inside_the_printed_name() -> None:
    assert issuer_matches("Free Service Abonné", "Free")
    assert issuer_matches("Amazon Web Services, Inc.", "Amazon Web Services")
    assert issuer_matches("MVM Musterhafter\nVersicherungsverein", "mvm musterhafter versicherungsverein")
    assert not issuer_matches("Freedom Mobile", "Free")  # whole words only
    assert not issuer_matches("Invoice from the provider Free of all charges", "Free")  # too many extra words
    assert not issuer_matches(None, "Free")


def test_field_rules() -> None:
    assert field_matches("reference", "# BLR_WFLD2015", "#BLR_WFLD2015")
    assert not field_matches("reference", "BLR_WFLD2016", "#BLR_WFLD2015")
    assert field_matches("amount", "4.10", "4.1")
    assert not field_matches("amount", "4.11", "4.1")
    assert field_matches("date", "2014-04-19", "2014-04-19") and not field_matches("date", "2014-04-18", "2014-04-19")
    assert field_matches("currency", None, None) and not field_matches("currency", "EUR", None)


def _gold_dir(tmp_path: Path) -> Path:
    d = tmp_path / "gold"
    einvoice_pdf(d / "zf_one.pdf", CII)
    (d / "zf_one.json").write_text(json.dumps({
        "invoice_number": EXPECTED["reference"], "type_code": "380", "issue_date": "20240305",
        "seller": {"name": EXPECTED["issuer"], "tax_ids": []}, "currency": "EUR", "grand_total": EXPECTED["amount"]}))
    make_pdf(d / "i2d_two.pdf", ["Rechnung Nr. 4711 vom 01.02.2024\nMusterfirma KG\nSumme 12,50 EUR"])
    (d / "i2d_two.json").write_text(json.dumps([{"issuer": "Musterfirma KG", "invoice_number": "4711",
                                                  "date": "2024-02-01", "currency": "EUR", "amount": 12.5}]))
    make_pdf(d / "no_gold.pdf", ["not scored"])
    make_pdf(d / "r_three.pdf", ["KEDAI MAJU SDN BHD\nTOTAL RM 4.00"])
    (d / "r_three.json").write_text(json.dumps({"doc_type": "receipt", "issuer": "KEDAI MAJU SDN BHD",
                                                 "reference": None, "date": None, "currency": "MYR", "amount": "4.0"}))
    return d


def test_load_gold_dir_reads_all_three_formats_and_splits_off_a_held_out_slice(tmp_path: Path) -> None:
    docs = {d.id: d for d in load_gold_dir(_gold_dir(tmp_path))}
    assert sorted(docs) == ["i2d_two", "r_three", "zf_one"]
    assert docs["r_three"].gold == {"doc_type": "receipt", "issuer": "KEDAI MAJU SDN BHD", "reference": None,
                                    "date": None, "currency": "MYR", "amount": "4.00"}
    for n in (3, 8, 13):
        folder = tmp_path / f"split{n}"
        folder.mkdir()
        for i in range(n):
            make_pdf(folder / f"d{i:02d}.pdf", [f"doc {i}"])
            (folder / f"d{i:02d}.json").write_text(json.dumps({k: None for k in docs["r_three"].gold}))
        dev, held = load_gold_dir(folder, "dev"), load_gold_dir(folder, "holdout")
        assert {d.id for d in dev} | {d.id for d in held} == {f"d{i:02d}" for i in range(n)}
        assert not {d.id for d in dev} & {d.id for d in held} and len(held) == n // 4
    assert docs["i2d_two"].gold == {"doc_type": "invoice", "issuer": "Musterfirma KG", "reference": "4711",
                                    "date": "2024-02-01", "currency": "EUR", "amount": "12.50"}
    assert docs["zf_one"].gold == {k: EXPECTED[k] for k in docs["zf_one"].gold}
    with pytest.raises(FileNotFoundError):
        load_gold_dir(tmp_path / "empty")


@pytest.mark.skipif(not (DEMO_MODEL_DIR / "model.safetensors").is_file(), reason="demo model not trained yet")
def test_eval_gold_scores_the_embedded_xml_path_and_the_model(tmp_path: Path) -> None:
    gold = _gold_dir(tmp_path)
    auto = run_eval(DEMO_MODEL_DIR, gold_dir=gold, progress=False)
    assert auto["gold_set"] == "real" and auto["n_documents"] == 3
    assert auto["extraction_methods"] == {"embedded_xml": 1, "model": 2}
    assert json.loads(auto["outputs"]["zf_one"]) == EXPECTED
    model = run_eval(DEMO_MODEL_DIR, gold_dir=gold, extraction="model", progress=False)
    assert model["extraction_methods"] == {"embedded_xml": 0, "model": 3}
    assert model["schema_validity"] == 1.0


@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")
def test_real_einvoices_are_read_exactly() -> None:
    """Every real e-invoice in the development set (7 ZUGFeRD/Factur-X CII, 1 UBL) scores 6/6 from its XML."""
    from eval.evaluate import Scores, load_gold_items

    items, _ = load_gold_items(REALDATA)
    embedded = [it for it in items if it.embedded is not None]
    assert len(embedded) == 8
    scores = Scores()
    for it in embedded:
        scores.add(it, json.dumps(it.embedded))
    report = scores.report()
    assert report["overall_accuracy"] == 1.0, report["failures"]
