"""Expected entries of the `.extract.beancount` files that sit beside some shared bank exports.

Only what the tests compare is read: each transaction's date and the amount of its posting to the statement's
own account (the first posting whose account matches `account_pattern`). A test helper, not a beancount parser.
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal
from pathlib import Path

_TXN = re.compile(r"^(\d{4}-\d{2}-\d{2}) [*!] ")
_POSTING = re.compile(r"^\s+(\S+)\s+(-?[\d.,]+)\s+([A-Z][A-Z0-9]*)\b")


def expected_entries(path: Path, account_pattern: str) -> list[tuple[date, Decimal, str]]:
    """(date, amount, currency) per transaction of a beancount extract, in file order."""
    wanted = re.compile(account_pattern)
    out: list[tuple[date, Decimal, str]] = []
    current: date | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if m := _TXN.match(line):
            current = date.fromisoformat(m.group(1))
            continue
        if current is not None and (p := _POSTING.match(line)) and wanted.search(p.group(1)):
            out.append((current, Decimal(p.group(2).replace(",", "")), p.group(3)))
            current = None
    return out
