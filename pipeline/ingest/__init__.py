"""Ingestion stage: input directory -> Arrow tables (documents, transactions, errors, files).

    ingest(input_dir, *, limit=None, default_currency=None, exclude=(), limits=None, progress=False)
        -> IngestResult

Each file is isolated: it is parsed in a worker process under `IngestLimits` (size, pages, text length, time,
memory), so whatever happens inside one file (corrupt PDF, unknown encoding, a parser bug, a hang in C code, a
crash) ends as an error row for that file and the run continues. PDF pages without a text layer are OCRed there
too (`ocr.py`); bank statement formats have one reader each (`formats/`), delimited logs may follow a bank
profile (`profiles.py`). Every discovered file appears in
`IngestResult.files` with its kind and status, so a run can be reconciled against its input.
"""

from pipeline.ingest.discover import (
    DOCUMENT_KINDS,
    IngestResult,
    discover_files,
    ingest,
)
from pipeline.ingest.limits import IngestLimits

__all__ = ["DOCUMENT_KINDS", "IngestLimits", "IngestResult", "discover_files", "ingest"]
