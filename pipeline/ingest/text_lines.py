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
