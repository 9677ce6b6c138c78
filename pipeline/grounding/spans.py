"""Names a document prints, as verbatim spans: the candidates for the counterparty.

A party is a line of the text or a part of one between separators ("Amazon Web Services, Inc." also yields
"Amazon Web Services"). The issuer has its own, narrower candidates (`pipeline.grounding.issuer`); invoice numbers
are found under their labels (`pipeline.grounding.choices`).
"""

from __future__ import annotations

import re

from pipeline.grounding._common import unique

MAX_PARTY_CHARS = 80
MAX_PARTY_WORDS = 8
MAX_LEADING_LABEL_WORDS = 3  # "Account holder Priya Costa", "Bill to ATTN iViveLabs": labels are short

_SEPARATORS = re.compile(r"\s+[-\u2013\u2014|/\u00b7\u2022]\s+|[|;()\[\]]|[:,](?=\s|$)|\s{2,}|\t")
_LETTERS = re.compile(r"[^\W\d_]{2}")

def _party_ok(s: str) -> bool:
    return bool(_LETTERS.search(s)) and len(s) <= MAX_PARTY_CHARS and len(s.split()) <= MAX_PARTY_WORDS


def party_candidates(text: str) -> list[str]:
    """Lines of the text that could name a party (also joined with the next line: long names wrap), their parts
    between separators, and each of those without up to
    `MAX_LEADING_LABEL_WORDS` leading words ("Customer Grünwald Telecom Inc." -> "Grünwald Telecom Inc."), in
    document order."""
    found: list[str] = []
    lines = [" ".join(line.split()) for line in text.splitlines()]
    for i, line in enumerate(lines):
        if not line:
            continue
        parts = [line] + [" ".join(p.split()).strip(" -") for p in _SEPARATORS.split(line)]
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if following and not _SEPARATORS.search(line + " " + following):  # a name wrapped onto the next line
            parts.append(f"{line} {following}")
        for part in parts:
            words = part.split()
            found.extend(" ".join(words[i:]) for i in range(min(len(words), MAX_LEADING_LABEL_WORDS + 1)))
    return unique(p for p in found if p and _party_ok(p))
