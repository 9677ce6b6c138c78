"""What of a document the model reads: the lines where its choices lie, not the whole page.

The decoding schema lets the model answer only a field's candidates (`choices`), and a field decided by its
labelled place leaves it no choice at all. So the prompt shows the lines holding a candidate of an undecided field,
each with the lines above it up to one with words (a label set over its value), plus what frames them: the first
lines of the document (letterhead, title, often the recipient), the recipient's block (the counterparty), the lines
an account number runs over, and the last lines (bank details, closing notes). "[...]" stands where lines are left
out. On a CPU the prompt's prefill is most of the model's time, and item lines, terms and small print are most of a
document's tokens.
"""

from __future__ import annotations

from functools import lru_cache

from pipeline.grounding.accounts import account_candidates
from pipeline.grounding.choices import document_choices
from pipeline.grounding.issuer import buyer_lines

HEAD_LINES = 12  # the letterhead, the title and the recipient's address lie within the first lines
TAIL_LINES = 3
GAP = "[...]"


def _account_lines(lines: list[str], accounts: list[str]) -> set[int]:
    """The lines each account number is printed over (an IBAN may run over a line break), and the line above."""
    squashed, line_of = [], []
    for i, line in enumerate(lines):
        for ch in line:
            if not ch.isspace():
                squashed.append(ch)
                line_of.append(i)
    text = "".join(squashed)
    out: set[int] = set()
    for account in accounts:
        pos = text.find(account)
        while pos >= 0:
            out |= {line_of[pos] - 1, *range(line_of[pos], line_of[pos + len(account) - 1] + 1)}
            pos = text.find(account, pos + 1)
    return out


def _label_above(lines: list[str], i: int) -> list[int]:
    """The lines above line i up to the first that has words: its label, past a currency sign or a blank set on
    lines of their own ("Total" / "$" / "279.84" where text extraction gives each cell a line)."""
    out = []
    for j in range(i - 1, -1, -1):
        out.append(j)
        if sum(ch.isalpha() for ch in lines[j]) >= 2:
            break
    return out


@lru_cache(maxsize=256)
def focused_text(text: str) -> str:
    """The document's lines the model needs to choose among its candidates, in order, "[...]" between gaps."""
    choices = document_choices(text)
    lines = text.splitlines()

    def open_values(name: str) -> set[str]:  # a decided field's value is forced by the schema: nothing to read
        choice = choices.fields[name]
        return set() if choice.decided else set(choice.values)

    # a field the labels decided needs no scan: its lines are not shown for it
    scanned = [(scan, values) for name, scan in choices.scanners().items() if (values := open_values(name))]
    names = [" ".join(v.split()) for v in open_values("issuer")]
    keep = set(range(min(HEAD_LINES, len(lines)))) | set(range(max(0, len(lines) - TAIL_LINES), len(lines)))
    keep |= buyer_lines(lines, {}) | _account_lines(lines, account_candidates(text))
    for i, line in enumerate(lines):
        if (any(v in values for scan, values in scanned for *_, v in scan(line))
                or any(name in " ".join(line.split()) for name in names if name)):
            keep |= {i, *_label_above(lines, i)}
    out: list[str] = []
    last = -1
    for i in sorted(k for k in keep if 0 <= k < len(lines)):
        if i > last + 1:
            out.append(GAP)
        out.append(lines[i])
        last = i
    return "\n".join(out)
