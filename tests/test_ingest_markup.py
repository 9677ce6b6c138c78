"""HTML, Markdown and EDGAR SGML filings are documents (they were UnsupportedFormat error rows before)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.ingest import ingest
from pipeline.ingest.markup import html_pages, is_sgml_submission, read_markup_document

FILING_HTML = """<html><head><title>t</title><style>p {color: red}</style></head><body>
<div style="display:none"><ix:header><ix:hidden>dei:EntityCentralIndexKey 0000789019</ix:hidden></ix:header></div>
<div style="page-break-after: always"><p>UNITED STATES</p><p>FORM 10-Q</p>
<p>Microsoft&nbsp;Corporation</p></div>
<div><p>INCOME STATEMENTS</p><p>(In millions, except per share amounts)</p>
<table><tr><td>Total revenue</td><td>$</td><td><ix:nonFraction name="us-gaap:Revenues" scale="6">56,517</ix:nonFraction></td></tr>
<tr><td>Net income</td><td>$</td><td>22,291</td></tr></table>
<script>var x = "not text";</script></div>
<div style="page-break-before:always"><p>Item 1A. Risk Factors</p></div></body></html>"""


def test_html_pages_follow_the_printed_page_breaks_and_drop_hidden_and_script_text():
    pages = html_pages(FILING_HTML)
    assert pages == ["UNITED STATES\nFORM 10-Q\nMicrosoft Corporation",
                     "INCOME STATEMENTS\n(In millions, except per share amounts)\nTotal revenue  $  56,517\n"
                     "Net income  $  22,291",
                     "Item 1A. Risk Factors"]


def _sgml(*docs: tuple[str, str, str]) -> bytes:
    blocks = "".join(f"<DOCUMENT>\n<TYPE>{t}\n<SEQUENCE>{i}\n<FILENAME>{n}\n<TEXT>\n{body}\n</TEXT>\n</DOCUMENT>\n"
                     for i, (t, n, body) in enumerate(docs, start=1))
    return f"<SEC-DOCUMENT>0000950170-23-054855.txt : 20231024\n<SEC-HEADER>\nCONFORMED SUBMISSION TYPE:\t10-Q\n" \
           f"</SEC-HEADER>\n{blocks}</SEC-DOCUMENT>\n".encode()


def test_an_edgar_submission_is_one_document_with_its_exhibits_and_lists_what_it_did_not_read():
    data = _sgml(("10-Q", "msft-10q.htm", FILING_HTML),
                 ("EX-31.1", "ex31.htm", "<html><body><p>I, Satya Nadella, certify that</p></body></html>"),
                 ("GRAPHIC", "logo.jpg", "begin 644 logo.jpg\nM_]C_X``02D9)1@`!`0$`8`!@``#_VP!#``@&!@<&!0@'!P<)\nend"),
                 ("EX-101.INS", "msft.xml", "<XBRL>\n<?xml version='1.0'?><xbrl/>\n</XBRL>"))
    assert is_sgml_submission(data[:100])
    doc = read_markup_document(data, "msft.txt")
    assert doc.page_count == 4 and doc.metadata["title"] == "10-Q"
    assert doc.pages[3] == "[EX-31.1 ex31.htm]\nI, Satya Nadella, certify that"
    assert doc.parts_not_read == ["GRAPHIC logo.jpg", "EX-101.INS msft.xml"]
    assert "begin 644" not in doc.text and "Net income  $  22,291" in doc.text


def test_markup_files_are_ingested_as_documents_with_no_error_row(tmp_path: Path):
    (tmp_path / "filing.htm").write_text(FILING_HTML)
    (tmp_path / "annual.md").write_text("# FORM 10-K\n\nApple Inc.\n\n| Net sales | $ 391,035 |\n|---|---|\n"
                                        "| Net income | $ 93,736 |\n")
    (tmp_path / "submission.txt").write_bytes(_sgml(("8-K", "a.htm", "<html><body><p>Item 2.02</p></body></html>")))
    res = ingest(tmp_path)
    docs = {d["source_file"]: d for d in res.documents.to_pylist()}
    assert res.errors.num_rows == 0 and sorted(docs) == ["annual.md", "filing.htm", "submission.txt"]
    assert docs["filing.htm"]["page_count"] == 3
    assert "Net sales  $ 391,035" in docs["annual.md"]["text"] and docs["submission.txt"]["text"] == "Item 2.02"
    kinds = {f["source_file"]: f["kind"] for f in res.files.to_pylist()}
    assert set(kinds.values()) == {"markup"}


def test_a_markup_file_without_text_is_that_documents_error_row(tmp_path: Path):
    (tmp_path / "empty.html").write_text("<html><body><script>x()</script></body></html>")
    res = ingest(tmp_path)
    (err,) = res.errors.to_pylist()
    assert res.documents.num_rows == 0 and err["error_class"] == "NoText" and err["unit"] == "document"


SHARED = Path(__file__).resolve().parents[2] / "shared" / "realdata" / "financial_text"


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared real filings absent")
def test_shared_html_and_markdown_filings_read_whole():
    htm = read_markup_document((SHARED / "edgartools_CAMP4_424B4_IPO-prospectus.htm").read_bytes(), "p.htm")
    md = read_markup_document((SHARED / "edgartools_Apple_10-K.md").read_bytes(), "a.md")
    assert htm.metadata["title"] == "424B4" and htm.page_count > 200 and "6,820,000 shares" in htm.pages[0]
    assert "Apple Inc." in md.text and "Total net sales" in md.text
    json.dumps(htm.parts_not_read)


IXBRL = """<html xmlns:ix="http://www.xbrl.org/2013/inlineXBRL"><body>
<div style="display:none"><ix:header><ix:resources>
<xbrli:context id="c-q3"><xbrli:entity><xbrli:identifier scheme="http://www.sec.gov/CIK">0000789019</xbrli:identifier>
</xbrli:entity><xbrli:period><xbrli:startDate>2023-07-01</xbrli:startDate><xbrli:endDate>2023-09-30</xbrli:endDate>
</xbrli:period></xbrli:context>
<xbrli:context id="c-cloud"><xbrli:entity><xbrli:identifier scheme="http://www.sec.gov/CIK">0000789019</xbrli:identifier>
<xbrli:segment><xbrldi:explicitMember dimension="us-gaap:StatementBusinessSegmentsAxis">msft:IntelligentCloudMember</xbrldi:explicitMember></xbrli:segment>
</xbrli:entity><xbrli:period><xbrli:startDate>2023-07-01</xbrli:startDate><xbrli:endDate>2023-09-30</xbrli:endDate>
</xbrli:period></xbrli:context>
<xbrli:context id="c-end"><xbrli:entity><xbrli:identifier scheme="http://www.sec.gov/CIK">0000789019</xbrli:identifier>
</xbrli:entity><xbrli:period><xbrli:instant>2023-09-30</xbrli:instant></xbrli:period></xbrli:context>
<xbrli:unit id="usd"><xbrli:measure>iso4217:USD</xbrli:measure></xbrli:unit>
<xbrli:unit id="usdPerShare"><xbrli:divide><xbrli:unitNumerator><xbrli:measure>iso4217:USD</xbrli:measure>
</xbrli:unitNumerator><xbrli:unitDenominator><xbrli:measure>xbrli:shares</xbrli:measure></xbrli:unitDenominator>
</xbrli:divide></xbrli:unit>
</ix:resources></ix:header></div>
<div style="page-break-after:always"><p>FORM 10-Q</p></div>
<table><tr><td>Revenue</td><td>$ <ix:nonFraction name="us-gaap:Revenues" contextRef="c-q3" unitRef="usd" scale="6"
 decimals="-6" format="ixt:num-dot-decimal">56,517</ix:nonFraction></td></tr>
<tr><td>Intelligent Cloud</td><td><ix:nonFraction name="us-gaap:Revenues" contextRef="c-cloud" unitRef="usd" scale="6"
 format="ixt:num-dot-decimal">24,259</ix:nonFraction></td></tr>
<tr><td>Other expense</td><td>(<ix:nonFraction name="us-gaap:OtherNonoperatingIncomeExpense" contextRef="c-q3"
 unitRef="usd" scale="6" sign="-" format="ixt:num-dot-decimal">185</ix:nonFraction>)</td></tr>
<tr><td>Diluted EPS</td><td>$ <ix:nonFraction name="us-gaap:EarningsPerShareDiluted" contextRef="c-q3"
 unitRef="usdPerShare" decimals="2">2.99</ix:nonFraction></td></tr>
<tr><td>Impairment</td><td><ix:nonFraction name="us-gaap:AssetImpairmentCharges" contextRef="c-q3" unitRef="usd"
 scale="6" format="ixt:fixed-zero">—</ix:nonFraction></td></tr>
<tr><td>Cash</td><td><ix:nonFraction name="us-gaap:Cash" contextRef="c-end" unitRef="usd" scale="3"
 format="ixt:num-comma-decimal">1.234,5</ix:nonFraction></td></tr></table>
<div style="page-break-before:always"><p>Revenue again: <ix:nonFraction name="us-gaap:Revenues" contextRef="c-q3"
 unitRef="usd" scale="6">56,517</ix:nonFraction></p></div></body></html>"""


def test_inline_xbrl_facts_are_read_exactly_with_scale_sign_format_units_dimensions_and_page():
    from decimal import Decimal

    doc = read_markup_document(IXBRL.encode(), "msft-10q.htm")
    facts = {(f.concept, f.dimensions): f for f in doc.facts}
    assert len(doc.facts) == 6  # the revenue shown again on page 3 is the same fact, once
    rev = facts[("us-gaap:Revenues", None)]
    assert (rev.value, rev.unit, rev.period_start, rev.period_end, rev.page) == (
        Decimal("56517000000"), "USD", "2023-07-01", "2023-09-30", 2)
    cloud = facts[("us-gaap:Revenues", "us-gaap:StatementBusinessSegmentsAxis=msft:IntelligentCloudMember")]
    assert cloud.value == Decimal("24259000000")
    assert facts[("us-gaap:OtherNonoperatingIncomeExpense", None)].value == Decimal("-185000000")
    eps = facts[("us-gaap:EarningsPerShareDiluted", None)]
    assert (eps.value, eps.unit) == (Decimal("2.99"), "USD/shares")
    assert facts[("us-gaap:AssetImpairmentCharges", None)].value == 0
    cash = facts[("us-gaap:Cash", None)]
    assert (cash.value, cash.period_start, cash.period_end) == (Decimal("1234500"), None, "2023-09-30")


def test_a_run_publishes_the_filing_facts_once(tmp_path: Path, fake_model: Path):
    from pipeline.config import RunConfig
    from pipeline.output.sink import read_dataset
    from pipeline.run import run_pipeline
    from tests.helpers.fake_llm import FakeLLM

    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "msft-10q.htm").write_text(IXBRL)
    cfg = RunConfig(input_dir=inputs, output_dir=tmp_path / "out", model_dir=fake_model, progress=False)
    first = run_pipeline(cfg, llm=FakeLLM())
    facts = read_dataset(tmp_path / "out", "filing_facts").to_pylist()
    assert len(facts) == 6 and {f["method"] for f in facts} == {"xbrl"} and first.reconciliation["balanced"]
    rev = next(f for f in facts if f["concept"] == "us-gaap:Revenues" and f["dimensions"] is None)
    assert str(rev["value"]).startswith("56517000000") and rev["scale_printed"] == "millions" and rev["page"] == 2
    again = run_pipeline(cfg, llm=FakeLLM())  # nothing new: the facts are not written twice
    assert read_dataset(tmp_path / "out", "filing_facts").num_rows == 6 and again.manifest["outputs"]["filing_facts"] == 0


def test_number_words_and_the_more_precise_duplicate():
    from decimal import Decimal

    from pipeline.ingest.inline_xbrl import displayed_value

    assert displayed_value("five", "ixt-sec:numwordsen") == 5
    assert displayed_value("twenty-one", "ixt-sec:numwordsen") == 21
    assert displayed_value("one hundred and two", "ixt-sec:numwordsen") == 102
    assert displayed_value("no", "ixt-sec:numwordsen") == 0 and displayed_value("several", "ixt-sec:numwordsen") is None
    twice = IXBRL.replace('<p>Revenue again: <ix:nonFraction name="us-gaap:Revenues" contextRef="c-q3"\n unitRef="usd" '
                          'scale="6">56,517</ix:nonFraction></p>',
                          '<p>Revenue about <ix:nonFraction name="us-gaap:Revenues" contextRef="c-q3" unitRef="usd" '
                          'scale="9" decimals="-8">56.5</ix:nonFraction> billion</p>')
    rev = next(f for f in read_markup_document(twice.encode(), "x.htm").facts
               if f.concept == "us-gaap:Revenues" and f.dimensions is None)
    assert rev.value == Decimal("56517000000") and rev.page == 2  # the statement's exact figure, where it is shown


def test_a_table_rows_cells_stay_on_one_line_when_they_hold_paragraphs():
    """Filings wrap cell text in <p>/<div>; the row is still one line (label, then its figures), as the statement
    reader needs."""
    html = ("<html><body><table><tr><td><p>Cash and cash equivalents</p></td><td><div>$</div></td>"
            "<td><p>10,616</p></td><td><p>10,454</p></td></tr><tr><td><p>Total assets</p></td><td></td>"
            "<td><p>141,984</p></td><td><p>140,976</p></td></tr></table></body></html>")
    assert html_pages(html) == ["Cash and cash equivalents  $  10,616  10,454\nTotal assets  141,984  140,976"]
