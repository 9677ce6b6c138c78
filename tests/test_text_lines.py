"""Line numbers of offsets into a text export, the way a reader reports where a record is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pipeline.ingest.text_lines import line_numbers


@given(st.text(alphabet="ab\n\r:", max_size=200), st.data())
def test_line_numbers_equal_counting_from_the_start(text: str, data: st.DataObject) -> None:
    offsets = data.draw(st.lists(st.integers(0, len(text)), max_size=20))
    expected = [text.count("\n", 0, o) + 1 for o in offsets]
    assert line_numbers(text, offsets) == expected
    assert line_numbers(text.encode(), offsets) == expected  # ASCII: byte and character offsets agree
