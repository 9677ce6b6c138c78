"""Ingestion stage: input directory -> Arrow tables (documents, transactions, errors, files).

    ingest(input_dir, *, limit=None, default_currency=None, exclude=(), progress=False) -> IngestResult

Each file is isolated: whatever happens inside one file (corrupt PDF, unknown encoding, a parser
bug) ends as an error row for that file and the run continues. Every discovered file appears in
`IngestResult.files` with its kind and status, so a run can be reconciled against its input.
"""

from pipeline.ingest.discover import IngestResult, discover_files, ingest

__all__ = ["IngestResult", "discover_files", "ingest"]
