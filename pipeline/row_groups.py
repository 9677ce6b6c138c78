"""Parquet files read one row group at a time (spool files of large logs, staged and published parts).

pyarrow's whole-file `ParquetFile.iter_batches` keeps pool memory for every row group it has passed, so its peak
grows with the file (253 MB over a 4.2 M-row file's 65 row groups, 37 MB read one group at a time:
docs/eval/bank-exports.md); a reader of a single row group holds only that group."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SPOOL_BATCH_ROWS = 262_144
"""Rows per slice where a large log's spool is read back (planning its windows, listing its accounts)."""


def row_group_batches(path: str | Path, batch_rows: int = SPOOL_BATCH_ROWS, columns: list[str] | None = None
                      ) -> Iterator[pa.RecordBatch]:
    """The file's rows (`columns` of them) in batches of at most `batch_rows`, one row group at a time."""
    f = pq.ParquetFile(str(path))
    for i in range(f.num_row_groups):
        yield from f.iter_batches(batch_size=batch_rows, row_groups=[i], columns=columns)
