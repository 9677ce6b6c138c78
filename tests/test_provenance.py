"""Per-field provenance of a documents row: the page, the character span of that page's text and the characters
printed there (pipeline.grounding.provenance), or the e-invoice XML element (tests/test_einvoice.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.grounding.provenance import FieldSource, text_sources
from pipeline.ingest.pdf_text import join_pages

PAGE_1 = "ACME Handels GmbH\nMusterstr. 12, 10115 Berlin\nRechnung\nRechnungsnummer: RE-2024-17\nDatum: 05.03.2024"
PAGE_2 = ("Position 1 Beratung 1.000,00\nIBAN DE89 3704 0044 0532 0130 00\nNetto 1.000,00 EUR\nTotal 1.190,00\n"
          "Gesamtbetrag: 1.190,00 EUR")
FIELDS = {"doc_type": "invoice", "issuer": "ACME Handels GmbH", "counterparty": None, "reference": "RE-2024-17",
          "date": "2024-03-05", "currency": "EUR", "amount": "1190.00", "account": "DE89370400440532013000"}


def _page_text(text: str, page: int) -> str:
    return text.split("\n[page ")[page - 1].split("]\n", 1)[-1] if page > 1 else text.split("\n[page ")[0]


def test_each_value_points_at_its_printed_place_on_its_page() -> None:
    text = join_pages([PAGE_1, PAGE_2])
    got = {s.field: s for s in text_sources(FIELDS, text)}
    assert set(got) == {"issuer", "reference", "date", "currency", "amount", "account"}  # doc_type is no place
    assert got["date"] == FieldSource("date", 1, PAGE_1.index("05.03.2024"), PAGE_1.index("05.03.2024") + 10,
                                      "05.03.2024")
    # the amount under its strong label ("Gesamtbetrag"), not the first printing under a weak one ("Total")
    start = PAGE_2.index("Gesamtbetrag: ") + len("Gesamtbetrag: ")
    assert got["amount"] == FieldSource("amount", 2, start, start + 8, "1.190,00")
    assert got["account"].printed == "DE89 3704 0044 0532 0130 00" and got["account"].page == 2
    assert got["reference"].printed == "RE-2024-17" and got["issuer"].char_start == 0
    for s in got.values():
        assert _page_text(text, s.page)[s.char_start:s.char_end] == s.printed


def test_a_value_the_text_does_not_print_has_no_source() -> None:
    text = join_pages([PAGE_1, PAGE_2])
    # an amount the page never prints, a currency inferred rather than printed: nothing is pointed at
    got = text_sources({**FIELDS, "amount": "1190.01", "currency": "CHF", "issuer": "Someone Else AG"}, text)
    assert {s.field for s in got} == {"reference", "date", "account"}


@settings(max_examples=40, deadline=None)
@given(before=st.lists(st.sampled_from(["Seite 1 von 2", "Kunde: Muster AG", "Menge 3 Stk", "Lieferung 12 Tage"]),
                       max_size=4),
       page=st.integers(min_value=1, max_value=3),
       total=st.decimals(min_value="0.01", max_value="99999.99", places=2))
def test_spans_slice_their_own_page_wherever_the_value_sits(before: list[str], page: int, total) -> None:
    """Property: on whichever page and after whatever lines a labelled total is printed, its source is that page
    and the span slices exactly the printed characters."""
    printed = f"{total:,.2f}".replace(",", " ")
    pages = ["Rechnung Nr. 4711", "Anlage", "Bedingungen"]
    pages[page - 1] += "\n" + "\n".join(before + [f"Gesamtbetrag: {printed} EUR"])
    text = join_pages(pages)
    (source,) = text_sources({"amount": f"{total:.2f}"}, text)
    assert source.page == page
    assert _page_text(text, page)[source.char_start:source.char_end] == source.printed
    assert source.printed.replace(" ", "") == f"{total:.2f}"
