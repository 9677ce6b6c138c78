"""Error rows: every rejected file, row, document or window becomes one of these, never a silent drop.

The same record type is used by every stage so the errors dataset has one schema and reconciliation
can count errors next to outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from pipeline.identity import stable_id


class Stage:
    """Stage names as stored in the `stage` column."""

    DISCOVER = "discover"
    INGEST = "ingest"
    PREPARE = "prepare"
    INFER = "infer"
    VALIDATE = "validate"


VALUE_OUT_OF_RANGE = "ValueOutOfRange"  # error_class of a window whose sums do not fit their declared decimal type


class Unit:
    """What an error row (or output row) accounts for."""

    FILE = "file"
    ROW = "row"
    DOCUMENT = "document"
    WINDOW = "window"
    SECTION = "section"  # a section of a long document, summarised on its own

    @staticmethod
    def of_request(kind: str) -> str:
        """The unit a model request of `kind` (document, window, section) accounts for."""
        return {"document": Unit.DOCUMENT, "window": Unit.WINDOW, "section": Unit.SECTION}[kind]


ERROR_ARROW_SCHEMA = pa.schema(
    [
        pa.field("error_id", pa.string(), nullable=False),
        pa.field("row_id", pa.string(), nullable=False),  # id of the unit that failed
        pa.field("unit", pa.string(), nullable=False),
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("source_row", pa.int64(), nullable=True),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("error_class", pa.string(), nullable=False),
        pa.field("message", pa.string(), nullable=False),
        pa.field("n_rows", pa.int64(), nullable=False),  # input rows this error accounts for
    ]
)


@dataclass(frozen=True)
class ErrorRecord:
    """One rejected unit. `row_id` identifies the unit so a later success can replace this error."""

    row_id: str
    unit: str
    source_file: str
    stage: str
    error_class: str
    message: str
    source_row: int | None = None
    n_rows: int = 1
    error_id: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.error_id:
            object.__setattr__(self, "error_id", stable_id("error", self.row_id, self.stage, self.error_class))


def errors_to_table(errors: list[ErrorRecord]) -> pa.Table:
    """Arrow table with `ERROR_ARROW_SCHEMA`."""
    cols = {name: [getattr(e, name) for e in errors] for name in ERROR_ARROW_SCHEMA.names}
    return pa.Table.from_pydict(cols, schema=ERROR_ARROW_SCHEMA)


def errors_from_table(table: pa.Table) -> list[ErrorRecord]:
    """Inverse of `errors_to_table`."""
    return [ErrorRecord(**row) for row in table.to_pylist()]
