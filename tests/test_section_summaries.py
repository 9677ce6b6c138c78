"""A section's summary is decoded from its own sentences (pipeline.grounding.sections), and any number an answer
states that the section does not print is flagged (pipeline.grounding.numbers)."""

from __future__ import annotations

from pipeline.grounding.numbers import unsupported_numbers
from pipeline.grounding.sections import grounded_section_schema, section_candidates
from pipeline.infer.validate import decoding_schema

SECTION = """PART II Item 1A
RISK FACTORS
Our business depends on our ability to attract new customers. Competition in our markets is intense and
may reduce our margins over the next several years.
Cyberattacks could lead to significant liability.
Revenue was concentrated: our largest customer accounted for 12% of revenue in 2023.
Total revenue $ 1,250 $ 1,100
Operating income 300 250
[page 7]
PART II Item 1A
We rely on a limited number of suppliers for certain components.
"""


def test_candidates_are_the_sections_own_sentences_and_lines() -> None:
    c = section_candidates(SECTION)
    joined = " ".join(SECTION.split())
    assert c.summary and all(s in joined for s in c.summary)  # verbatim, wrapped lines joined
    assert ("Competition in our markets is intense and may reduce our margins over the next several years."
            in c.summary)  # a sentence a PDF wrapped over two lines
    assert not any("1,250" in s or "PART II" in s for s in c.summary + c.points)  # no table rows, running headers
    assert "Cyberattacks could lead to significant liability." in c.points
    assert all(not unsupported_numbers([s], SECTION) for s in c.summary + c.points)


def test_the_decoding_schema_admits_only_the_candidates() -> None:
    schema = decoding_schema("section", SECTION)
    c = section_candidates(SECTION)
    assert schema["properties"]["summary"]["enum"] == list(c.summary)
    assert schema["properties"]["key_points"]["items"]["enum"] == list(c.points)
    table_only = "Total revenue $ 1,250 $ 1,100\nNet income 210 180\n"
    narrowed = grounded_section_schema(decoding_schema("section"), table_only)
    assert narrowed["properties"]["summary"]["enum"] == ["Total revenue $ 1,250 $ 1,100"]  # no prose: its first line
    assert narrowed["properties"]["key_points"]["maxItems"] == 0


def test_numbers_a_section_does_not_print_are_flagged() -> None:
    text = "Revenue was $56,517 million, up 13% from 2022."
    assert unsupported_numbers(["Revenue was 56517 million in 2022.", "Up 13%."], text) == []
    assert unsupported_numbers(["Revenue reached 56.5 billion.", "It rose 14%."], text) == ["56.5", "14"]
