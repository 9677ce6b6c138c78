"""Section splitting: sections tile the document (nothing lost, nothing read twice), each within its budget, with
the pages they span and the heading they fall under (pipeline.plan.sections)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.pdf_text import join_pages
from pipeline.plan.sections import split_sections

_LINES = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=300),
    st.sampled_from(["Item 1A. Risk Factors", "ITEM 7. MANAGEMENT'S DISCUSSION AND ANALYSIS", "PART II",
                     "CONSOLIDATED BALANCE SHEETS", "Risk factors 12", "Legal Proceedings", "", "x" * 900]),
)
_PAGES = st.lists(st.lists(_LINES, max_size=12).map("\n".join), min_size=1, max_size=8).map(join_pages)


def _words(text: str) -> int:  # a second measure, like a tokenizer's: not proportional to characters
    return len(text.split())


@settings(max_examples=300, deadline=None)
@given(text=_PAGES, budget=st.integers(1, 2000), by_words=st.booleans())
def test_sections_tile_the_text_within_budget(text: str, budget: int, by_words: bool) -> None:
    measure = _words if by_words else len
    sections = split_sections(text, budget, measure)
    assert "".join(text[s.start:s.end] for s in sections) == text  # nothing lost, nothing duplicated
    assert [s.index for s in sections] == list(range(len(sections)))
    assert all(a.end == b.start for a, b in zip(sections, sections[1:]))
    assert all(s.start < s.end and measure(text[s.start:s.end]) <= budget for s in sections)
    pages = text.count("\n[page ") + (1 if text.startswith("[page ") else 0) + 1
    assert all(1 <= s.page_start <= s.page_end <= pages for s in sections)
    assert all(a.page_end <= b.page_start for a, b in zip(sections, sections[1:]))


def test_items_headings_pages_and_running_headers() -> None:
    body = "word " * 60
    pages = [
        "ACME CORP\nFORM 10-K\nIndex\nItem 1A. Risk Factors 12\nItem 7. MD&A 30",
        f"PART I\nItem 1. Business\n{body}",
        f"PART I\nItem 1A. Risk Factors\n{body}\nWe may lose customers.\n{body}",
        f"PART I\n{body}\nITEM 7. MANAGEMENT'S DISCUSSION AND ANALYSIS OF FINANCIAL CONDITION\n{body}",
        f"PART I\nCONSOLIDATED BALANCE SHEETS\n{body}",
    ]
    text = join_pages(pages)
    sections = split_sections(text, 10_000)
    got = [(s.title, s.item, s.page_start, s.page_end) for s in sections]
    assert got == [
        ("", None, 1, 2),  # the cover and contents: contents lines (a page number after the title) open nothing
        ("Item 1. Business", "1", 2, 3),  # "PART I" repeats on every page: a running header, not a heading
        ("Item 1A. Risk Factors", "1A", 3, 4),
        ("ITEM 7. MANAGEMENT'S DISCUSSION AND ANALYSIS OF FINANCIAL CONDITION", "7", 4, 5),
        ("CONSOLIDATED BALANCE SHEETS", "7", 5, 5),  # a statement under the item it is printed in
    ]


def test_an_over_budget_section_is_cut_at_pages_first() -> None:
    pages = ["Item 1A. Risk Factors\n" + "risk " * 100] + ["risk " * 100] * 5
    text = join_pages(pages)
    sections = split_sections(text, 1100)
    assert len(sections) > 1
    assert all(s.title == "Item 1A. Risk Factors" and s.item == "1A" for s in sections)
    assert all(s.start == 0 or text[s.start:].startswith("[page ") for s in sections)  # cut where pages start
