"""Synthetic data: deterministic, golds recoverable from the extracted text, logs readable, eval set intact."""

from __future__ import annotations

import csv
import io
import json
import random
import re
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pypdf import PdfReader

from data.tools import docs, fake, transactions, txlogs
from data.tools.build_dataset import build
from pipeline.ingest.pdf_text import document_text, needs_ocr, page_texts
from pipeline.plan.windows import reference_summary, window_facts
from schemas import AccountWindowSummary, DocumentExtraction

DATA = Path(__file__).resolve().parents[1] / "data"


def _text(pdf: bytes) -> str:
    return document_text(page_texts(PdfReader(io.BytesIO(pdf))))


def _digits(s: str) -> str:
    return re.sub(r"[^0-9]", "", s)


def test_generator_is_deterministic():
    assert docs.invoice(random.Random(11)).pdf == docs.invoice(random.Random(11)).pdf
    assert build(4, 5, 2) == build(4, 5, 2)
    assert build(4, 5, 2) != build(6, 5, 2)


@pytest.mark.parametrize("doc_type", sorted(docs.BUILDERS))
def test_gold_values_are_in_the_extracted_text(doc_type):
    rng = random.Random(21)
    for _ in range(6):
        d = docs.BUILDERS[doc_type](rng)
        gold = DocumentExtraction.model_validate(d.gold)
        text = _text(d.pdf)
        flat = re.sub(r"\s+", "", text)
        assert gold.doc_type.value == doc_type
        assert gold.issuer in text and gold.counterparty in text and gold.reference in text
        if gold.account:
            assert gold.account in flat
        if gold.amount:
            assert gold.currency in text and _digits(gold.amount) in _digits(text)


def test_iban_check_digits_are_valid():
    for seed in range(20):
        iban = fake.iban(random.Random(seed))
        numeric = "".join(str(int(ch, 36)) for ch in iban[4:] + iban[:4])
        assert int(numeric) % 97 == 1


@pytest.mark.parametrize("style,text", [("en", "-1,234,567.50"), ("de", "-1.234.567,50"), ("fr", "-1 234 567,50"),
                                        ("plain", "-1234567.50")])
def test_amount_styles(style, text):
    assert fake.fmt_amount(Decimal("-1234567.5"), style) == text


def test_image_only_pages_have_no_text_layer():
    d = docs.invoice(random.Random(3))
    scan = docs.image_only(random.Random(3), _text(d.pdf), d.gold, "invoice")
    assert needs_ocr(page_texts(PdfReader(io.BytesIO(scan.pdf))))
    assert not needs_ocr(page_texts(PdfReader(io.BytesIO(d.pdf))))


def test_long_statements_span_pages():
    rng = random.Random(5)
    pages = {docs.bank_statement(rng, long=True).notes["pages"] for _ in range(8)}
    assert 2 in pages


def test_csv_layouts_round_trip(tmp_path):
    txs = transactions.account_transactions(random.Random(8), months=1)
    for name, layout in txlogs.LAYOUTS.items():
        path = tmp_path / f"{name}.csv"
        rows = txlogs.write_csv(path, txs, layout, bad_rows={1: "oops"})
        with path.open(encoding=layout.encoding, newline="") as fh:
            records = list(csv.reader(fh, delimiter=layout.delimiter))
        assert tuple(records[0]) == layout.header
        assert rows[0] == 2 and len(records) == len(txs) + 1
        for tx, rec in zip(txs, records[1:]):
            if records.index(rec) == 2:
                assert "oops" in rec
                continue
            if layout.split_debit_credit:
                debit, credit = rec[2], rec[3]
                value = -Decimal(debit) if debit else Decimal(credit)
            else:
                raw = rec[2]
                value = Decimal(raw.replace(".", "").replace(",", ".") if layout.amount_style == "de" else raw)
            assert value == tx.amount
    assert (tmp_path / "latin1.csv").read_bytes().decode("latin-1")


def test_samples_manifest_matches_files():
    manifest = json.loads((DATA / "samples_manifest.json").read_text(encoding="utf-8"))
    files = {p.name for p in (DATA / "samples").iterdir()}
    assert set(manifest["files"]) == files
    assert sum((DATA / "samples" / f).stat().st_size for f in files) < 1_000_000
    kinds = {e.get("layout") for e in manifest["files"].values()}
    assert {"comma", "semicolon_de", "latin1", "jsonl"} <= kinds
    assert any(e.get("needs_ocr") for e in manifest["files"].values())
    assert any("error" in e for e in manifest["files"].values())


def test_eval_set_is_complete_and_consistent():
    ev = DATA / "eval"
    documents = [json.loads(x) for x in (ev / "documents.jsonl").open(encoding="utf-8")]
    scored = [d for d in documents if not d["needs_ocr"]]
    assert len(scored) >= 200
    for d in documents:
        assert (ev / d["file"]).is_file()
        DocumentExtraction.model_validate(d["gold"])
    windows = [json.loads(x) for x in (ev / "windows.jsonl").open(encoding="utf-8")]
    assert len(windows) >= 50
    facts = window_facts(pq.read_table(ev / "transactions.parquet"))
    assert [w["facts"] for w in windows] == facts
    for w in windows:
        assert reference_summary(w["facts"]) == AccountWindowSummary.model_validate(w["gold"])
