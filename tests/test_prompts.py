"""Prompts: shared instruction first (cacheable), variable content last, fixed answer marker."""

from __future__ import annotations

import pytest

from pipeline.plan.prompts import (
    ANSWER_MARKER,
    DOCUMENT_INSTRUCTION,
    PROMPT_VERSION,
    WINDOW_FACT_LABELS,
    WINDOW_INSTRUCTION,
    render_document_prompt,
    render_window_prompt,
)

FACTS = {"account": "DE89370400440532013000", "period_start": "2024-03-01", "period_end": "2024-03-31",
         "currency": "EUR", "tx_count": 12, "credits": "4100.00", "debits": "350.25", "net": "3749.75",
         "large_cash_count": 1, "new_counterparty_count": 0, "structuring_count": 2, "foreign_count": 0}


def test_document_prompt_layout():
    a = render_document_prompt("Invoice No: A-1\nTotal: 10.00 EUR\n")
    b = render_document_prompt("Bank statement\nClosing balance 5.00")
    assert a.startswith(DOCUMENT_INSTRUCTION) and b.startswith(DOCUMENT_INSTRUCTION)
    assert a.endswith("Total: 10.00 EUR\n" + ANSWER_MARKER)
    assert a[len(DOCUMENT_INSTRUCTION):].startswith("Invoice No: A-1")
    assert PROMPT_VERSION


def test_window_prompt_states_every_fact_in_order():
    text = render_window_prompt(FACTS)
    assert text.startswith(WINDOW_INSTRUCTION) and text.endswith(ANSWER_MARKER)
    body = text[len(WINDOW_INSTRUCTION):-len(ANSWER_MARKER)].splitlines()
    assert body == [f"{label}: {FACTS[key]}" for key, label in WINDOW_FACT_LABELS]


def test_window_prompt_rejects_missing_facts():
    facts = dict(FACTS)
    del facts["structuring_count"]
    with pytest.raises(KeyError, match="structuring_count"):
        render_window_prompt(facts)
