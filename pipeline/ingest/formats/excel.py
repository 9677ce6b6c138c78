"""Excel and OpenDocument spreadsheets (XLS, XLSX, XLSM, XLSB, ODS) with python-calamine.

Each sheet is searched for a transaction header like a delimited file, and the rows below it keep their typed
cells (dates and numbers need no text parsing). source_row is the sheet's row number; when several sheets hold
transactions it is sheet number x 1,000,000 + row, so every row of the file has its own.
"""

from __future__ import annotations

import io
from typing import Any

from pipeline.ingest.columns import ColumnMatch
from pipeline.ingest.tabular import NotATable, RawTable, best_header, content_header

SUFFIXES = frozenset({".xls", ".xlsx", ".xlsm", ".xlsb", ".ods"})
SHEET_STRIDE = 1_000_000
_MAGIC = (b"PK\x03\x04", b"\xd0\xcf\x11\xe0")  # zip (xlsx, ods), OLE2 (xls)


def sniff(head: bytes) -> bool:
    return head.startswith(_MAGIC)


def _text(cell: Any) -> str:
    return "" if cell is None else str(cell).strip()


def read(data: bytes) -> list[RawTable]:
    """One table per sheet that holds transactions (each mapped on its own: sheets may differ in layout)."""
    # lazy: one bank format's parser, loaded when such a file appears
    from python_calamine import CalamineWorkbook

    try:
        book = CalamineWorkbook.from_filelike(io.BytesIO(data))
    except Exception as exc:  # CalamineError and friends: not a workbook, encrypted, corrupt
        raise NotATable(f"unreadable spreadsheet: {type(exc).__name__}: {exc}") from exc
    grids: list[tuple[str, list[list[Any]]]] = []
    notes: list[str] = []
    for name in book.sheet_names:
        try:
            grids.append((name, book.get_sheet_by_name(name).to_python(skip_empty_area=False)))
        except Exception as exc:
            notes.append(f"sheet {name!r} unreadable ({type(exc).__name__})")
    return grid_tables(grids, notes, "sheet")


def grid_tables(grids: list[tuple[str, list[list[Any]]]], notes: list[str], part: str) -> list[RawTable]:
    """One RawTable per grid of cells (a sheet, an HTML table) that holds a transaction header, the rows below it
    numbered as the module docstring says; `part` names a grid in messages ("sheet", "table")."""
    notes = list(notes)
    found_tables: list[tuple[int, str, int, ColumnMatch, list[list[Any]]]] = []
    for number, (name, cells) in enumerate(grids, start=1):
        texts = [[_text(c) for c in row] for row in cells[:70]]
        found = best_header(texts)
        if found is None and (by_content := content_header(texts)) is not None:
            found = ((0.0,), *by_content)
        if found is None:
            if any(_text(c) for row in cells for c in row):
                notes.append(f"{part} {name!r} has no header with a date and an amount column")
            continue
        found_tables.append((number, name, found[1], found[2], cells))
    if not found_tables:
        raise NotATable(f"no {part} with a transaction table" + (f" ({'; '.join(notes)})" if notes else ""))
    several = len(found_tables) > 1
    tables = []
    for number, name, index, match, cells in found_tables:
        offset = number * SHEET_STRIDE if several else 0
        header = [_text(c) for c in cells[index]]
        table = RawTable(
            header=header, match=match,
            rows=[(offset + r + 1, list(row)) for r, row in enumerate(cells)
                  if r > index and any(_text(c) for c in row)],
            encoding=None, preamble=[" ".join(_text(c) for c in row if _text(c)) for row in cells[:index]],
            notes=[f"{part} {name!r}; source_row is " + (f"{part} number x 1,000,000 + row number" if several
                                                          else "its row number"), *notes])
        tables.append(table)
    return tables
