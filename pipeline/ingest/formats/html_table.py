"""HTML tables saved under a spreadsheet's name: many banks' "Excel export" (`.xls`) is an HTML page with a
table. lxml reads the page; each <table> is searched for a transaction header like a spreadsheet's sheet.
Chosen by content only (no suffix of its own): an `.xls` that is a real workbook goes to the spreadsheet reader."""

from __future__ import annotations

import re
from typing import Any

from pipeline.ingest.formats.excel import grid_tables
from pipeline.ingest.tabular import NotATable

SUFFIXES: frozenset[str] = frozenset()
_HTML_START = re.compile(rb"^(?:\xef\xbb\xbf)?\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body|meta|table)\b",
                         re.IGNORECASE | re.DOTALL)


def sniff(head: bytes) -> bool:
    return bool(_HTML_START.match(head[:4096]))


def _cell(node: Any) -> str:
    return " ".join(node.text_content().split())


def read(data: bytes) -> list:
    # lazy: one bank format's parser, loaded when such a file appears
    import lxml.etree
    import lxml.html

    try:
        page = lxml.html.document_fromstring(data, parser=lxml.html.HTMLParser(no_network=True, huge_tree=False))
    except (lxml.etree.ParserError, ValueError) as exc:
        raise NotATable(f"unreadable HTML table: {exc}") from exc
    grids = []
    for n, table in enumerate(page.iter("table"), start=1):
        rows = [[_cell(c) for c in tr if c.tag in ("td", "th")] for tr in table.iter("tr")
                if tr.getparent() is table or tr.getparent().getparent() is table]  # not a nested table's rows
        if rows:
            grids.append((f"#{n}", rows))
    if not grids:
        raise NotATable("HTML without a table")
    return grid_tables(grids, [], "HTML table")
