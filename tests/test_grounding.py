"""Grounded extraction: candidates scanned from document text, and decoding narrowed to them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from pipeline.plan.bucketing import prepare_requests
from pipeline.grounding import Choice, account_candidates, amount_candidates, date_candidates, grounded_schema
from pipeline.run import infer
from pipeline.infer.validate import decoding_schema
from pipeline.plan.work import WorkUnit
from schemas import DocumentExtraction
from tests.helpers.fake_llm import ByteTokenizer, FakeLLM

TEXT = """Northwind Bank AG
Statement date 05.03.2024 Period: 1 Feb 2024 - February 29, 2024
Opening balance EUR 1.234,50  Fees -12.00 Interest 7 654,32
Closing balance USD 12,345.67 and 987.65 and -1,000.00
Reference AS-2024-77556 Client account ACC-1234567
IBAN DE89 3704 0044 0532 0130
00, BIC COBADEFFXXX, also NL91ABNA0417164300
Not amounts: 1.234.56 v1.2 12.345 3,5
"""


def test_dates_in_every_printed_style_become_iso() -> None:
    got = date_candidates(TEXT + "due 3rd March 2024, on 2024-04-30, bogus 31.02.2024, 07/08/2024")
    assert got[:3] == ["2024-03-05", "2024-02-01", "2024-02-29"]
    assert {"2024-03-03", "2024-04-30", "2024-08-07", "2024-07-08"} <= set(got)
    assert not any(d.startswith("2024-02-31") for d in got)


def test_slash_dash_and_year_first_dates() -> None:
    got = date_candidates("paid 2024/03/05. Booked 05-03-2024; build 1.2.2024.1 is a version, not a date")
    assert got == ["2024-03-05", "2024-05-03"]  # d-m-y is ambiguous: both readings are kept


def test_whole_amounts_count_only_next_to_a_currency() -> None:
    got = amount_candidates("Total EUR 1,200 and $950, 3.500 USD, USD -2 000; 42 items in 2024")
    assert got == ["1200.00", "950.00", "3500.00", "-2000.00", "2000.00"]  # a negative amount's absolute value too


def test_amounts_in_every_locale_become_plain_decimals() -> None:
    got = amount_candidates(TEXT)
    for want in ("1234.50", "-12.00", "7654.32", "12345.67", "987.65", "-1000.00"):
        assert want in got
    assert "654.32" in got  # a space-grouped number is also read from its last group: the model decides
    assert not {"1234.56", "234.56", "12.34", "345.00", "5.03"} & set(got)  # "05.03.2024" is a date
    # a printed sign belongs to the amount; its absolute value follows it (a credit note's total is positive)
    assert got.index("12.00") == got.index("-12.00") + 1 and got.index("1000.00") == got.index("-1000.00") + 1


def test_accounts_valid_ibans_even_when_wrapped_and_keep_account_tokens() -> None:
    got = account_candidates(TEXT)
    assert "DE89370400440532013000" in got  # wrapped onto the next line: joined, and checked by its checksum
    assert "DE893704004405320130" not in got  # the one-line reading fails the checksum
    assert {"NL91ABNA0417164300", "ACC-1234567", "AS-2024-77556"} <= set(got)
    assert not {"COBADEFFXXX", "2024", "3704"} & set(got)  # fewer than five digits: not an account token


def test_grounded_schema_narrows_only_the_string_branch() -> None:
    plain = decoding_schema("document")
    schema = grounded_schema(plain, {"date": Choice(("2024-03-05", "not a date"), "strong"),
                                     "amount": Choice((), "none"),
                                     "account": Choice(("DE89370400440532013000",), "printed", nullable=True)})
    assert schema["properties"]["date"] == {"type": "string", "enum": ["2024-03-05"]}  # pattern filters candidates
    assert schema["properties"]["amount"] == {"type": "null"}  # nothing found: null, never an invented amount
    account = schema["properties"]["account"]["anyOf"]
    assert {"type": "string", "enum": ["DE89370400440532013000"]} in account and {"type": "null"} in account
    assert plain == decoding_schema("document"), "the plain schema must not be modified"
    bad = grounded_schema(plain, {"date": Choice(("bad",), "strong")})["properties"]["date"]
    assert bad == {"type": "null"}  # no candidate fits the pattern: null where the schema allows it
    issuer = grounded_schema(plain, {"doc_type": Choice(("receipt",), "strong")})["properties"]["doc_type"]
    assert issuer == {"type": "string", "enum": ["receipt"]}  # an enum type narrowed to its candidate members


def test_grounding_enums_are_capped() -> None:
    """A statement with thousands of amounts must not turn into a grammar of thousands of alternatives."""
    from pipeline.grounding import MAX_ENUM_VALUES

    text = " ".join(f"EUR {i}.{i % 100:02d}" for i in range(1, 3001))
    amounts = amount_candidates(text)
    assert len(amounts) == 3000
    enum = grounded_schema(decoding_schema("document"), {"amount": Choice(tuple(amounts), "unlabelled")}
                           )["properties"]["amount"]
    values = next(b["enum"] for b in enum.get("anyOf", [enum]) if "enum" in b)
    assert len(values) == MAX_ENUM_VALUES
    assert values[0] == amounts[0] and values[-1] == amounts[-1]  # the top and the bottom of the document


def test_windows_are_never_grounded() -> None:
    assert decoding_schema("window", "DE89370400440532013000") == decoding_schema("window")


def test_constrained_decoding_only_emits_printed_values(tmp_path: Path) -> None:
    """Random logits under the grounded schema: every date, amount and account is a scanned value (or null)."""
    from tokenizers import Tokenizer

    from engine.structured import StructuredOutputBackend
    from tests.helpers.checkpoints import build_tokenizer

    build_tokenizer(tmp_path)
    tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    vocab, eos = tok.get_vocab_size(), 1
    backend = StructuredOutputBackend((tmp_path / "tokenizer.json").read_text(), vocab, [eos], num_threads=1)
    schema = decoding_schema("document", TEXT)
    gen = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(6):
        matcher = backend.new_matcher(schema)
        mask = backend.allocate_mask(1)
        out: list[int] = []
        while not out or out[-1] != eos:
            assert len(out) < 400, "generation did not finish"
            logits = torch.randn(1, vocab, generator=gen)
            matcher.fill_allowed(mask, 0)
            backend.apply_mask(logits, mask)
            tid = int(logits.argmax())
            matcher.accept(tid)
            out.append(tid)
        obj = DocumentExtraction.model_validate(json.loads(tok.decode(out[:-1])))
        assert obj.date in date_candidates(TEXT)
        assert obj.amount is None or obj.amount in amount_candidates(TEXT)
        assert obj.account is None or obj.account in account_candidates(TEXT)
        seen.add((obj.date, obj.amount, obj.account))
    assert len(seen) > 1, "random logits should reach different candidates"


class _RecordingLLM(FakeLLM):
    def __init__(self) -> None:
        super().__init__()
        self.schemas: list[dict[str, Any]] = []

    def generate_stream(self, prompts: list[list[int]], params: Any, progress: bool = True):
        self.schemas.extend(p.json_schema for p in params)
        yield from super().generate_stream(prompts, params, progress)


def test_pipeline_grounds_each_document_in_the_text_its_prompt_shows() -> None:
    tail = " Total EUR 99.99"  # beyond the truncation point: the model never sees it
    units = [WorkUnit(row_id="d0", kind="document", source_files=["a.pdf"], text=TEXT),
             WorkUnit(row_id="d1", kind="document", source_files=["b.pdf"], text="x" * 3000 + tail)]
    prep = prepare_requests(units, ByteTokenizer(), 1024, {"document": 20, "window": 20})
    llm = _RecordingLLM()
    list(infer(llm, prep.buckets, run_fields={}))
    assert len(llm.schemas) == 2
    grounded = [s for s in llm.schemas if "enum" in json.dumps(s["properties"]["amount"])]
    assert len(grounded) == 1
    assert grounded[0]["properties"]["amount"] == {"type": "string", "enum": ["12345.67"]}  # the closing balance
    truncated = next(s for s in llm.schemas if s is not grounded[0])
    # nothing scannable in the visible part (99.99 and EUR are cut off): no amount and no currency to name
    assert truncated["properties"]["amount"] == {"type": "null"}
    assert truncated["properties"]["currency"] == {"type": "null"}
    assert "99.99" not in json.dumps(truncated)


# ------------------------------------------------------------------ gaps measured on real invoices (issue 19)

def test_month_names_in_european_languages() -> None:
    text = ("Factuurdatum: 29 maart 2014\nRechnungsdatum 7. Mai 2014\nFacture du 02 Juillet 2015\n"
            "Fecha: 3 de marzo de 2024\nInvoice Date: August 3 , 2014\n19 april 2014Factuurdatum:")
    assert date_candidates(text) == ["2014-03-29", "2014-05-07", "2015-07-02", "2024-03-03", "2014-08-03",
                                     "2014-04-19"]
    assert date_candidates("Mai 2014, Seite 3 von 2014, Order 12 Widgets 2014") == []


def test_ibans_are_checksum_valid_and_not_glued_to_the_next_word() -> None:
    got = account_candidates("NL50INGB0683251309IBAN\nINGBNL2ABIC\nIBAN : FR76 10107 00245 00617052317 39 - BIC")
    assert got[:2] == ["NL50INGB0683251309", "FR7610107002450061705231739"]
    assert not any(a.startswith("NL50INGB0683251309I") for a in got[:2])
    assert "NL50INGB0683251308" not in account_candidates("IBAN NL50INGB0683251308")  # bad checksum


def test_a_credit_notes_negative_total_is_also_a_positive_amount() -> None:
    assert amount_candidates("Gutschrift Gesamtbetrag -233,47 \u20ac") == ["-233.47", "233.47"]
    assert "1939.00" in amount_candidates("Grand Total Rs 1939")


def test_currency_is_a_printed_code_or_symbol_or_null() -> None:
    from pipeline.grounding import currency_candidates

    assert currency_candidates("Totaal \u20ac 717,97; paid in USD; THE END; Rs 1939") == ["EUR", "USD", "INR"]
    schema = decoding_schema("document", "Invoice 12 from ACME LLC")  # "LLC" is no currency; none is printed
    assert schema["properties"]["currency"] == {"type": "null"}


def test_parties_are_verbatim_lines_or_parts_of_lines() -> None:
    from pipeline.grounding import party_candidates

    got = party_candidates("Amazon Web Services, Inc.\n410 Terry Ave North\nSold By : WS Retail Services Pvt. Ltd.,")
    assert {"Amazon Web Services, Inc.", "Amazon Web Services", "WS Retail Services Pvt. Ltd."} <= set(got)
    schema = decoding_schema("document", "Amazon Web Services, Inc.\nInvoice Number: 42183017")
    assert schema["properties"]["issuer"]["enum"][0] == "Amazon Web Services, Inc."
    assert schema["properties"]["reference"] == {"type": "string", "enum": ["42183017"]}


def test_a_year_before_a_prefixed_amount_is_no_amount() -> None:
    from pipeline.grounding import amount_candidates

    assert amount_candidates("TOTAL AMOUNT DUE ON August 3 , 2014 $4.11") == ["4.11"]
    assert amount_candidates("Rs 1939 x 1 Night; 1939 Rs paid; 950 \u20ac") == ["1939.00", "950.00"]


# ---------------------------------------------------------------- account windows

def _facts(**counts: int) -> dict[str, object]:
    base = {"large_cash_count": 0, "new_counterparty_count": 0, "structuring_count": 0, "foreign_count": 0}
    return {**base, **counts}


def test_window_flags_are_bounded_by_their_non_zero_counts() -> None:
    from pipeline.infer.validate import decoding_schema

    schema = decoding_schema("window", facts=_facts(new_counterparty_count=2, foreign_count=1))
    assert schema["properties"]["flags"]["items"]["enum"] == ["new_counterparties", "foreign_currency"]
    assert schema["properties"]["flags"]["maxItems"] == 2
    assert schema["properties"]["risk_level"]["enum"] == ["low", "medium", "high"]
    one = decoding_schema("window", facts=_facts(structuring_count=4))
    assert one["properties"]["flags"]["items"]["enum"] == ["structuring"]
    assert one["properties"]["risk_level"]["enum"] == ["low", "medium"]
    none = decoding_schema("window", facts=_facts())
    assert none["properties"]["flags"] == {"type": "array", "maxItems": 0}
    assert none["properties"]["risk_level"]["enum"] == ["low"]
    assert "enum" in decoding_schema("window")["properties"]["flags"]["items"]  # without facts: the plain schema


def test_window_grounding_never_rules_out_the_reference_answer() -> None:
    """The reference rule's flags and risk always fit the grounded schema (checked on the eval set's windows)."""
    import json
    from pathlib import Path

    from pipeline.infer.validate import decoding_schema
    from pipeline.plan.windows import reference_summary

    lines = (Path(__file__).resolve().parents[1] / "data" / "eval" / "windows.jsonl").read_text().splitlines()
    for line in lines:
        facts = json.loads(line)["facts"]
        gold = reference_summary(facts)
        props = decoding_schema("window", facts=facts)["properties"]
        assert gold.risk_level.value in props["risk_level"]["enum"]
        assert len(gold.flags) <= props["flags"]["maxItems"]
        assert all(f.value in props["flags"].get("items", {}).get("enum", []) for f in gold.flags)

