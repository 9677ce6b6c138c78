"""What of a document the model reads (`pipeline.grounding.focus`): the lines of its open choices, and what frames
them; a pipeline run's and a grounded eval's document prompts show that, the model alone reads everything."""

from __future__ import annotations

import pipeline.grounding
from pipeline.grounding import document_choices, focused_text
from pipeline.grounding.dates import date_spans
from pipeline.grounding.focus import GAP, HEAD_LINES, TAIL_LINES
from pipeline.plan.bucketing import _fit
from pipeline.plan.work import WorkUnit

ITEMS = [f"Widget model {n} blue 1 x {n}.10" for n in range(30)]


def _invoice(items: list[str] = ITEMS) -> str:
    head = ["Nordwind Handels GmbH", "Hauptstraße 7", "10115 Berlin", "INVOICE", "Bill to:", "Blaubeer Logistik AG",
            "Am Hafen 3", "20457 Hamburg", "Invoice No: RE-2291", "Date: 03.02.2024", "Delivery 04.02.2024",
            "Description Qty Price"]
    tail = ["Total due EUR 119.00", "Zahlbar innerhalb 14 Tagen", "Notes", "IBAN DE89 3704 0044 0532",
            "0130 00", "Thank you"]
    return "\n".join(head + items + tail)


def test_the_model_reads_the_lines_of_its_open_choices_and_what_frames_them() -> None:
    text = _invoice()
    shown = focused_text(text)
    lines = shown.splitlines()
    assert lines[:HEAD_LINES] == text.splitlines()[:HEAD_LINES]  # letterhead, title, recipient
    assert lines[-TAIL_LINES:] == text.splitlines()[-TAIL_LINES:]
    assert "IBAN DE89 3704 0044 0532" in lines  # an account number over a line break: both lines
    assert GAP in lines and not any(item in lines for item in ITEMS[1:-1])  # the item lines are left out
    assert len(shown) < len(text) / 2


def test_every_candidate_the_model_chooses_among_stands_in_what_it_reads() -> None:
    # no date is labelled: the model chooses among the page's dates, one of them amid the item lines
    items = ITEMS[:15] + ["Widget edition of 05.01.2024"] + ITEMS[15:]
    text = _invoice(items).replace("Date: 03.02.2024", "03.02.2024")
    choices = document_choices(text)
    date = choices.fields["date"]
    assert not date.decided and "2024-01-05" in date.values
    lines = focused_text(text).splitlines()
    assert "Widget edition of 05.01.2024" in lines and ITEMS[14] in lines  # the line above it too
    printed = {v for line in lines for *_, v in date_spans(line, choices.date_order)}
    assert set(date.values) <= printed


def test_an_amount_the_model_must_choose_keeps_its_line_and_the_label_above_it() -> None:
    # two unlabelled figures and no arithmetic between them: the model chooses, so both lines stay
    items = ITEMS[:10] + ["Summe", "512.34"] + ITEMS[10:20] + ["Gesamt", "498.10"] + ITEMS[20:]
    shown = focused_text(_invoice(items).replace("Total due EUR 119.00", "Kontakt"))
    choice = document_choices(_invoice(items).replace("Total due EUR 119.00", "Kontakt")).fields["amount"]
    assert not choice.decided and {"512.34", "498.10"} <= set(choice.values)
    assert "Summe\n512.34" in shown and "Gesamt\n498.10" in shown


def test_a_label_set_lines_above_its_value_past_a_currency_sign_is_kept() -> None:
    # text extraction gave each cell its own line: "Total" / "$" / "279.84"
    cells = ["Subtotal", "$", "262.90", "Tax 15%", "$ 16.94", "Total", "$", "279.84"]
    text = _invoice(ITEMS[:10] + cells + ITEMS[10:]).replace("Total due EUR 119.00", "Kontakt")
    assert not document_choices(text).fields["amount"].decided
    assert "Total\n$\n279.84" in focused_text(text) and "Subtotal\n$\n262.90" in focused_text(text)


def test_a_short_document_is_shown_whole() -> None:
    text = "ACME SDN BHD\nTAX INVOICE\nReceipt No: CS001\nTOTAL RM 4.00\nCASH 10.00\nCHANGE 6.00"
    assert focused_text(text) == text


def test_a_runs_document_prompt_shows_the_focused_text() -> None:
    class Words:  # a tokenizer without a chat template: one id per character
        chat_template = None

        def encode(self, text: str) -> list[int]:
            return [ord(c) for c in text]

    text = _invoice()
    unit = WorkUnit(row_id="r", kind="document", source_files=["a.pdf"], text=text)
    shown = "".join(chr(i) for i in unit.prompt_ids(Words()))
    assert focused_text(text) in shown and ITEMS[15] not in shown
    # a truncated text is focused the same way
    cut = text[:len(text) // 2]
    assert focused_text(cut) in "".join(chr(i) for i in unit.prompt_ids(Words(), cut))


def test_a_document_whose_focused_prompt_is_too_long_is_cut_as_it_is_scanning_its_candidates_once(monkeypatch) -> None:
    """Truncation searches the longest prefix that fits; focusing each prefix would compute every candidate again
    at each step (30 s a time on a 352-page book), so a document whose focused prompt does not fit is read as a
    prefix of its text, and its candidates are scanned once."""
    class Words:
        chat_template = None

        def encode(self, text: str) -> list[int]:
            return [ord(c) for c in text]

    calls: list[int] = []
    real = pipeline.grounding.focused_text

    def counted(text: str) -> str:
        calls.append(len(text))
        return real(text)

    monkeypatch.setattr(pipeline.grounding, "focused_text", counted)
    # every line a date the model chooses among: the focused text is the whole text
    text = "ACME GMBH\n" + "\n".join(f"Item {i} 2024-03-{i % 28 + 1:02d} 1 x 5" for i in range(200))
    unit = WorkUnit(row_id="r", kind="document", source_files=["a.pdf"], text=text)
    ids, truncated, full, chars = _fit(unit, Words(), 2_000)
    assert truncated and chars is not None and 0 < chars < len(text) and len(ids) <= 2_000
    assert "".join(chr(i) for i in ids).find(text[:chars].strip()) > 0  # the prefix as it is, no "[...]"
    assert [n for n in calls if n > 0] == [len(text)]  # the whole text's candidates, once
