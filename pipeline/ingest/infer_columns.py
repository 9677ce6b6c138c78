"""Column roles for header-less tables, inferred from what the cells contain."""

from __future__ import annotations

import re
from typing import Any

from pipeline.ingest.columns import ColumnMatch
from pipeline.ingest.values import choose_date_format

_AMOUNTISH = re.compile(r"^\s*[+-]?\(?[+-]?[$€£]?\s*[0-9]+(?:[ .,'][0-9]{3})*(?:[.,][0-9]{1,4})?\)?[+-]?\s*$")
_DECIMAL = re.compile(r"[.,][0-9]{1,2}\)?[+-]?\s*$")


def infer_roles(rows: list[tuple[int, list[Any]]], width: int) -> ColumnMatch:
    """date: the column whose cells parse as dates; amount: mostly decimal numbers with cents;
    description: the longest free-text column; counterparty: the next text column."""
    cols: list[list[str]] = [[] for _ in range(width)]
    for _, rec in rows[:500]:
        for i in range(width):
            cols[i].append(str(rec[i]).strip() if i < len(rec) and rec[i] is not None else "")
    roles: dict[str, list[int]] = {}
    used: set[int] = set()
    for i, values in enumerate(cols):
        non_empty = [v for v in values if v]
        if len(non_empty) >= max(1, len(values) // 2) and choose_date_format(non_empty):
            roles["date"] = [i]
            used.add(i)
            break
    best_amount: tuple[float, int] | None = None
    for i, values in enumerate(cols):
        non_empty = [v for v in values if v]
        if i in used or not non_empty:
            continue
        numeric = sum(1 for v in non_empty if _AMOUNTISH.match(v)) / len(non_empty)
        decimals = sum(1 for v in non_empty if _DECIMAL.search(v)) / len(non_empty)
        if numeric >= 0.9 and decimals >= 0.5 and (best_amount is None or decimals > best_amount[0]):
            best_amount = (decimals, i)
    if best_amount:
        roles["amount"] = [best_amount[1]]
        used.add(best_amount[1])
    text_cols = []
    for i, values in enumerate(cols):
        non_empty = [v for v in values if v]
        if i in used or not non_empty:
            continue
        if sum(1 for v in non_empty if any(ch.isalpha() for ch in v)) / len(non_empty) >= 0.5:
            text_cols.append((sum(len(v) for v in non_empty) / len(values), i))
    text_cols.sort(reverse=True)
    if text_cols:
        roles["description"] = [text_cols[0][1]]
    if len(text_cols) > 1:
        roles["counterparty"] = [text_cols[1][1]]
    return ColumnMatch(roles=roles)
