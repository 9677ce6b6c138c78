"""Numbers a model's free text states that its source does not print.

A summary may only repeat the section's figures: every number in the answer (as digits: "56,517", "2.99", "2023",
"19%") must occur in the section. Digits are compared without grouping separators, so "56517" in the answer
matches "56,517" in the text; "56.5 billion" does not match "56,517 million" (a restatement is not a quote).
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def _numbers(text: str) -> set[str]:
    return {m.group(0).replace(",", "").rstrip(".") for m in _NUMBER.finditer(text)}


def unsupported_numbers(answer: list[str], source: str) -> list[str]:
    """The numbers in `answer` (the model's strings) that `source` does not print, in order of appearance."""
    printed = _numbers(source)
    out: list[str] = []
    for text in answer:
        for m in _NUMBER.finditer(text):
            digits = m.group(0).replace(",", "").rstrip(".")
            if digits and digits not in printed and m.group(0) not in out:
                out.append(m.group(0))
    return out
