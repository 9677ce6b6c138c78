"""A long filing is read whole: its sections are summarised one request each, the reduce step turns them and the
cover into the filing's documents row, and nothing of its text is left unread or read twice."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa

from pipeline.config import RunConfig
from pipeline.output.filings import filing_row
from pipeline.output.sink import read_dataset
from pipeline.plan.bucketing import FilingPlan
from pipeline.plan.work import WorkUnit
from pipeline.run import run_pipeline
from tests.helpers.fake_llm import BAD_MARKER, FakeLLM
from tests.helpers.pipeline_inputs import make_pdf

PARAGRAPH = "The company designs and sells widgets to retailers across many markets and channels. " * 12


def _ten_q_pages() -> list[str]:
    cover = ("UNITED STATES SECURITIES AND EXCHANGE COMMISSION\nFORM 10-Q\nFor the Quarterly Period Ended "
             "June 30, 2024\nCommission File Number 001-12345\nACME WIDGETS CORPORATION\n")
    statement = ("PART I. FINANCIAL INFORMATION\nItem 1. Financial Statements\nCONDENSED CONSOLIDATED STATEMENTS OF "
                 "OPERATIONS\n(In millions, except per share amounts)\nThree Months Ended June 30,\n2024 2023\n"
                 "Total revenue $ 1,250 $ 1,100\nCost of revenue 500 450\nOperating income 300 250\n"
                 "Net income $ 210 $ 180\nEarnings per share:\nDiluted $ 0.42 $ 0.36\n")
    risks = f"Item 1A. Risk Factors\n{PARAGRAPH}\nCompetition may reduce our margins. {BAD_MARKER}\n{PARAGRAPH}"
    mdna = f"Item 2. Management's Discussion and Analysis\n{PARAGRAPH}\n{PARAGRAPH}"
    return [cover, statement, risks, mdna, PARAGRAPH]


def test_a_filing_is_read_whole_by_sections(tmp_path: Path, fake_model: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    make_pdf(inputs / "acme-10q.pdf", _ten_q_pages())
    cfg = RunConfig(input_dir=inputs, output_dir=tmp_path / "out", model_dir=fake_model, progress=False,
                    section_tokens=600)  # the fake tokenizer counts bytes: several sections
    summary = run_pipeline(cfg, llm=FakeLLM(max_model_len=1200))
    docs = read_dataset(tmp_path / "out", "documents").to_pylist()
    sections = sorted(read_dataset(tmp_path / "out", "filing_sections").to_pylist(), key=lambda r: r["section_index"])
    assert len(docs) == 1 and len(sections) > 3
    doc = docs[0]
    assert (doc["route"], doc["form_type"], doc["doc_type"], doc["issuer"], doc["date"], doc["reference"],
            doc["currency"], doc["amount"]) == ("sections", "10-Q", "filing", "ACME WIDGETS CORPORATION",
                                                dt.date(2024, 6, 30), "001-12345", "USD", None)
    assert doc["text_read_fraction"] == 1.0 and not doc["truncated"]
    # the cover's values point at the cover; the currency (from the facts) has no printed place of its own
    assert {s["field"]: s["page"] for s in doc["field_sources"]} == {"issuer": 1, "reference": 1, "date": 1}
    assert doc["sections_read"] == doc["sections_total"] == len(sections)
    # the sections tile the text: contiguous, from its first character to its last
    assert sections[0]["char_start"] == 0 and all(a["char_end"] == b["char_start"] for a, b in zip(sections,
                                                                                                    sections[1:]))
    assert sum(s["chars_read"] for s in sections) == sections[-1]["char_end"]
    assert {s["filing_row_id"] for s in sections} == {doc["row_id"]}
    flagged = [s for s in sections if s["unsupported_numbers"]]  # the answer quotes a figure the section lacks
    assert flagged and all(not s["grounded"] and s["item"] == "1A" for s in flagged)
    assert all(s["grounded"] for s in sections if not s["unsupported_numbers"])
    facts = read_dataset(tmp_path / "out", "filing_facts").to_pylist()
    revenue = [f for f in facts if f["concept"] == "us-gaap:Revenues" and str(f["period_end"]) == "2024-06-30"]
    assert len(revenue) == 1 and revenue[0]["method"] == "table" and int(revenue[0]["value"]) == 1_250_000_000
    assert summary.reconciliation["balanced"]
    again = run_pipeline(cfg, llm=FakeLLM(max_model_len=1200))
    assert again.manifest["outputs"]["filing_sections"] == 0 and again.manifest["outputs"]["documents"] == 0


def test_the_reduce_counts_what_was_read() -> None:
    text = "a" * 100
    unit = WorkUnit(row_id="f1", kind="filing", source_files=["x.pdf"], text=text,
                    context={"doc_id": "d", "form_type": "10-K", "registrant": "ACME", "period_end": "2024-12-31",
                             "file_number": None})
    plan = FilingPlan(unit, [("s0", 30), ("s1", 50), ("s2", 20)])
    rows = {"s0": {"chars_read": 30, "prompt_tokens": 40, "output_tokens": 9},
            "s2": {"chars_read": 15, "prompt_tokens": 30, "output_tokens": 7}}  # s1 failed; s2 was cut short
    row = filing_row(plan, rows, [], {"model_id": "m"})
    assert row["text_read_fraction"] == 0.45 and row["truncated"] and row["needs_review"]
    assert (row["sections_read"], row["sections_total"], row["prompt_tokens"], row["output_tokens"]) == (2, 3, 70, 16)
    assert row["currency"] is None and row["issuer"] == "ACME" and row["route"] == "sections"
    full = filing_row(plan, {**rows, "s1": {"chars_read": 50, "prompt_tokens": 60, "output_tokens": 8},
                             "s2": {"chars_read": 20, "prompt_tokens": 30, "output_tokens": 7}}, [], {})
    assert full["text_read_fraction"] == 1.0 and not full["truncated"] and not full["needs_review"]
    assert pa.Table.from_pylist([full]).num_rows == 1


def test_the_section_size_is_part_of_a_filings_identity(tmp_path: Path, fake_model: Path) -> None:
    """Other --section-tokens cut other sections: a re-run with them must not take the filing as already done."""
    from pipeline.plan.work import filing_row_id, run_identity

    inputs = tmp_path / "in"
    inputs.mkdir()
    tokenizer = FakeLLM().tokenizer
    ids = {filing_row_id("doc", run_identity(RunConfig(input_dir=inputs, model_dir=fake_model, section_tokens=n),
                                             tokenizer)) for n in (1024, 2048)}
    assert len(ids) == 2
