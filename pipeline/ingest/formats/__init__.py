"""Readers for the structured statement and spreadsheet formats banks hand out, one module per format.

Each module has `SUFFIXES`, `sniff(head) -> bool` and `read(data)`: the statement formats return a
`statement.Statement` of entries, the spreadsheet reader `RawTable`s that are mapped like delimited files.
`reader_for` picks one by content first (an MT940 saved as .txt is still MT940), then by file suffix.
"""

from __future__ import annotations

from types import ModuleType

from pipeline.ingest.formats import (
    camt,
    excel,
    html_table,
    mt940,
    ofx,
    qif,
    spreadsheet_xml,
)

READERS: tuple[ModuleType, ...] = (ofx, camt, mt940, qif, excel, html_table, spreadsheet_xml)
SUFFIXES = frozenset().union(*(r.SUFFIXES for r in READERS))


def reader_for(suffix: str, head: bytes) -> ModuleType | None:
    """The reader whose format the file's first bytes show, else the one its suffix names, else None."""
    for reader in READERS:
        if reader.sniff(head):
            return reader
    return next((r for r in READERS if suffix in r.SUFFIXES), None)
