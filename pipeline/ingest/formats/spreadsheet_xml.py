"""Excel's XML Spreadsheet 2003 (SpreadsheetML): what brokerages and banks hand out as an `.xls` that is one XML
document of <Worksheet>/<Table>/<Row>/<Cell>/<Data>. Neither calamine nor openpyxl reads it, so its cells are
taken here with lxml (no entities, no network) and searched for a transaction header like a workbook's sheets.
Chosen by content only (no suffix of its own): an `.xls` that is a real workbook goes to the spreadsheet reader."""

from __future__ import annotations

import io
import re
from datetime import datetime
from typing import Any

from pipeline.ingest.formats.excel import grid_tables
from pipeline.ingest.tabular import NotATable

SUFFIXES: frozenset[str] = frozenset()
_NS = "urn:schemas-microsoft-com:office:spreadsheet"
_SIGNATURE = re.compile(rb'progid="Excel\.Sheet"|<(?:\w+:)?Workbook\b[^>]*urn:schemas-microsoft-com:office:spreadsheet')


def sniff(head: bytes) -> bool:
    return bool(_SIGNATURE.search(head[:4096]))


def _value(data: Any) -> Any:
    """A cell's value as its ss:Type says: numbers kept as their text (exact decimals), dates as datetimes."""
    text = "".join(data.itertext()).strip()
    kind = data.get(f"{{{_NS}}}Type")
    if kind == "DateTime" and text:
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            return text
    return text


def read(data: bytes) -> list:
    # lazy: one bank format's parser, loaded when such a file appears
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        root = etree.parse(io.BytesIO(data), parser).getroot()
    except etree.XMLSyntaxError as exc:
        raise NotATable(f"unreadable XML spreadsheet: {exc}") from exc
    grids = []
    for n, sheet in enumerate(root.iter(f"{{{_NS}}}Worksheet"), start=1):
        rows: list[list[Any]] = []
        for row in sheet.iter(f"{{{_NS}}}Row"):
            cells: list[Any] = []
            for cell in row.iter(f"{{{_NS}}}Cell"):
                index = cell.get(f"{{{_NS}}}Index")  # a cell after empty ones names its 1-based column
                if index and index.isdigit():
                    cells += [None] * max(0, int(index) - 1 - len(cells))
                data_node = next(cell.iter(f"{{{_NS}}}Data"), None)
                cells.append(None if data_node is None else _value(data_node))
            rows.append(cells)
        if rows:
            grids.append((sheet.get(f"{{{_NS}}}Name") or f"#{n}", rows))
    if not grids:
        raise NotATable("XML spreadsheet without a worksheet")
    return grid_tables(grids, [], "sheet")
