"""Names and numbers a document prints, as verbatim spans: the candidates for issuer, counterparty and reference.

A party is a line of the text or a part of one between separators ("Amazon Web Services, Inc." also yields
"Amazon Web Services"). A reference is a token holding a digit; tokens next to an invoice-number label in one of
the languages of European invoices come first, including the value PDF text extraction glues in front of its label
("993548900Factuurnummer:"). No library finds "the invoice number" of arbitrary layouts; these are plain scans
whose only job is to list what the text states, and the model chooses among them.
"""

from __future__ import annotations

import re

from pipeline.grounding._common import in_order, unique

MAX_PARTY_CHARS = 80
MAX_PARTY_WORDS = 8
MAX_LEADING_LABEL_WORDS = 3  # "Account holder Priya Costa", "Bill to ATTN iViveLabs": labels are short
MAX_REFERENCE_CHARS = 40

_SEPARATORS = re.compile(r"\s+[-\u2013\u2014|/\u00b7\u2022]\s+|[|;()\[\]]|[:,](?=\s|$)|\s{2,}|\t")
_LETTERS = re.compile(r"[^\W\d_]{2}")

REFERENCE_LABELS = (
    r"invoice\s*(?:number|no\.?|nr\.?|#|n[o\u00b0\u00ba])", r"inv\.?\s*no\.?", r"bill\s*(?:number|no\.?)",
    r"receipt\s*(?:number|no\.?)", r"credit\s*note\s*(?:number|no\.?)", r"document\s*(?:number|no\.?)",
    r"invoice\s*id", r"booking\s*id", r"statement\s*(?:number|no\.?)",
    r"rechnungs?\s*-?\s*(?:nummer|nr\.?)", r"rechnung\s*nr\.?", r"beleg\s*-?\s*(?:nummer|nr\.?)",
    r"gutschrift\s*(?:nummer|nr\.?)",
    r"facture\s*n\s*[o\u00b0\u00ba]\.?", r"n\s*[o\u00b0\u00ba]\.?\s*(?:de\s*)?facture", r"num[e\u00e9]ro\s*de\s*facture",
    r"avoir\s*n\s*[o\u00b0\u00ba]",
    r"factuur\s*-?\s*(?:nummer|nr\.?)", r"creditnota\s*(?:nummer|nr\.?)",
    r"n[u\u00fa]mero\s*de\s*factura", r"factura\s*n\s*[o\u00b0\u00ba.]", r"n\s*[o\u00b0\u00ba]\.?\s*(?:de\s*)?factura",
    r"fattura\s*n\s*[o\u00b0\u00ba.]?", r"numero\s*fattura",
)
_LABEL = re.compile("(?:" + "|".join(REFERENCE_LABELS) + ")", re.I)
_VALUE_AFTER = re.compile(r"[\s.:#\u00b0\u00ba]*(?:#\s?)?(?P<v>[A-Za-z0-9][\w/.\-]*)")
_VALUE_AFTER_SAME_LINE = re.compile(r"[ \t.:#\u00b0\u00ba]*(?:# ?)?(?P<v>[A-Za-z0-9][\w/.\-]*)")
# "Kundennr.30064443", "n\u00b0562044387": a number label glued to its number; the number alone is the candidate
_GLUED_TAIL = re.compile(r"^[^\W\d_]*(?:nr|no|n|num|nummer|id)[.\u00b0\u00ba:#](?P<tail>\w[\w/.\-]*)$", re.I)
_TOKEN = re.compile(r"[^\s:;,()\[\]<>\"'|]+")


def _clean_token(t: str) -> str:
    return t.strip(".-/").lstrip("#")


def _is_reference(t: str) -> bool:
    return 3 <= len(t) <= MAX_REFERENCE_CHARS and any(c.isdigit() for c in t)


def reference_candidates(text: str) -> list[str]:
    """The values next to an invoice-number label when the text has any (a document that labels its number
    means that number, not the order, customer or VAT number beside it); otherwise every token holding a digit,
    in document order."""
    labelled: list[tuple[int, str]] = []
    for m in _LABEL.finditer(text):
        before = re.search(r"(?P<v>[A-Za-z0-9][\w/.\-]*)\Z", text[max(0, m.start() - MAX_REFERENCE_CHARS):m.start()])
        glued = bool(before and _is_reference(_clean_token(before["v"])))
        if glued:  # glued in front of its label by text extraction ("993548900Factuurnummer:")
            labelled.append((m.start(), _clean_token(before["v"])))  # type: ignore[index]
        # the value after the label, on the next line too unless the label already has its glued value
        after = (_VALUE_AFTER_SAME_LINE if glued else _VALUE_AFTER).match(text, m.end())
        if after and _is_reference(_clean_token(after["v"])):
            labelled.append((m.start(), _clean_token(after["v"])))
    if labelled:
        return unique(in_order(labelled))
    others = []
    for m in _TOKEN.finditer(text):
        token = _clean_token(m.group(0))
        tail = _GLUED_TAIL.match(token)
        others.append((m.start(), _clean_token(tail["tail"]) if tail else token))
    return unique([v for v in in_order(others) if _is_reference(v)])


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
