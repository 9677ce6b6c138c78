"""Output schemas: decoding schema == training target format; Arrow schemas derived from pydantic."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import llguidance
import pyarrow as pa
import pytest
from pydantic import ValidationError

from schemas import (
    SCHEMA_VERSION,
    TRANSACTION_ARROW_SCHEMA,
    AccountWindowSummary,
    DocumentExtraction,
    Flag,
    arrow_schema_for,
    arrow_values,
    constrained_json_schema,
    to_compact_json,
)

DOC = {"doc_type": "invoice", "issuer": "Alder Logistics GmbH", "counterparty": "Zoe Müller", "reference": "INV-2024-00012",
       "date": "2024-03-05", "currency": "EUR", "amount": "1234.50", "account": "DE89370400440532013000"}


@pytest.mark.parametrize("model", [DocumentExtraction, AccountWindowSummary])
def test_constrained_schema_requires_every_field_in_model_order(model):
    schema = constrained_json_schema(model)
    assert list(schema["properties"]) == list(model.model_fields)
    assert schema["required"] == list(model.model_fields)
    assert schema["additionalProperties"] is False
    assert schema["x-guidance"]["whitespace_flexible"] is False
    text = json.dumps(schema)
    assert "$ref" not in text and "title" not in text and "description" not in text


@pytest.mark.parametrize("model", [DocumentExtraction, AccountWindowSummary])
def test_llguidance_compiles_the_constrained_schema(model):
    grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(constrained_json_schema(model)))
    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    assert (is_error, messages) == (False, [])


def test_compact_json_is_the_training_target_format():
    text = to_compact_json(DocumentExtraction.model_validate(DOC))
    assert text.startswith('{"doc_type":"invoice","issuer":"Alder Logistics GmbH","counterparty":"Zoe Müller"')
    assert ", " not in text and ": " not in text
    assert list(json.loads(text)) == list(DocumentExtraction.model_fields)
    assert DocumentExtraction.model_validate_json(text).model_dump(mode="json") == DOC


@pytest.mark.parametrize("field,value", [("date", "05.03.2024"), ("amount", "1,234.50"), ("amount", "12.5"),
                                         ("currency", "eur"), ("account", "DE89 3704"), ("doc_type", "memo")])
def test_document_fields_reject_unnormalised_values(field, value):
    with pytest.raises(ValidationError):
        DocumentExtraction.model_validate({**DOC, field: value})


def test_nullable_document_fields():
    doc = DocumentExtraction.model_validate({**DOC, "currency": None, "amount": None, "account": None})
    assert '"amount":null' in to_compact_json(doc)
    # schema 2.0: a document need not name its issuer or print a date (never invented), but always has a type
    nameless = DocumentExtraction.model_validate({**DOC, "issuer": None, "date": None})
    assert nameless.issuer is None and nameless.date is None
    with pytest.raises(ValidationError):
        DocumentExtraction.model_validate({**DOC, "doc_type": None})


def test_flags_must_be_canonical_and_unique():
    base = {"classification": "net_inflow", "risk_level": "high", "narrative": "x"}
    ok = AccountWindowSummary.model_validate({**base, "flags": ["large_cash", "structuring"]})
    assert ok.flags == [Flag.LARGE_CASH, Flag.STRUCTURING]
    for flags in (["structuring", "large_cash"], ["large_cash", "large_cash"], ["unknown"]):
        with pytest.raises(ValidationError):
            AccountWindowSummary.model_validate({**base, "flags": flags})


def test_arrow_schemas_follow_the_pydantic_models():
    doc = arrow_schema_for(DocumentExtraction)
    assert doc.names == list(DocumentExtraction.model_fields)
    assert doc.field("doc_type").nullable is False and doc.field("amount").nullable is True
    assert doc.field("issuer").nullable is True and doc.field("date").nullable is True
    # the model writes every field as text; dates and amounts are stored typed (schema 3.0)
    assert doc.field("date").type == pa.date32() and doc.field("amount").type == pa.decimal128(18, 2)
    assert all(f.type == pa.string() for f in doc if f.name not in ("date", "amount"))
    win = arrow_schema_for(AccountWindowSummary)
    assert win.field("flags").type == pa.list_(pa.string())
    dumped = DocumentExtraction.model_validate(DOC).model_dump(mode="json")
    table = pa.Table.from_pylist([arrow_values(DocumentExtraction, dumped)], schema=doc)
    assert table.num_rows == 1
    assert table.column("amount")[0].as_py() == Decimal(dumped["amount"])  # exact, never through a float
    assert table.column("date")[0].as_py() == dt.date.fromisoformat(dumped["date"])
    # the JSON schema the model is constrained to still asks for text
    assert DocumentExtraction.model_json_schema()["properties"]["amount"]["anyOf"][0]["type"] == "string"


def test_transaction_schema_matches_the_team_contract():
    expected = [("account", pa.string()), ("timestamp", pa.timestamp("us", tz="UTC")), ("amount", pa.decimal128(18, 4)),
                ("currency", pa.string()), ("counterparty", pa.string()), ("description", pa.string()),
                ("source_file", pa.string()), ("source_row", pa.int64())]
    assert [(f.name, f.type) for f in TRANSACTION_ARROW_SCHEMA] == expected
    assert TRANSACTION_ARROW_SCHEMA.field("counterparty").nullable
    assert SCHEMA_VERSION.count(".") == 2
