"""Physical lines of a text export: split at CR, LF or CRLF only.

`str.splitlines` also breaks at U+2028, U+2029, U+0085, form feeds and other separators, which are ordinary
characters inside a CSV field or a JSON string; splitting there cut records in two and shifted every later
`source_row`.
"""

from __future__ import annotations

import re

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def physical_lines(text: str, keepends: bool = False) -> list[str]:
    lines = _LINE.findall(text)
    return lines if keepends else [ln.rstrip("\r\n") for ln in lines]



def line_numbers(text: str | bytes, offsets: list[int]) -> list[int]:
    """The 1-based line (counted at LF) of each offset into `text`, in one pass over the text: counting from the
    start for each offset is quadratic in a long statement's entries."""
    newline = "\n" if isinstance(text, str) else b"\n"
    result = [0] * len(offsets)
    line, at = 1, 0
    for k in sorted(range(len(offsets)), key=offsets.__getitem__):
        line += text.count(newline, at, offsets[k])  # type: ignore[arg-type]
        at = offsets[k]
        result[k] = line
    return result
