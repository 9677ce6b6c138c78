"""The filing-facts table: one row per numeric fact a filing states (long format), the Arrow schema ingestion
fills (pipeline.ingest.inline_xbrl) and the filing_facts dataset extends with its row identity."""

import pyarrow as pa

FACT_ARROW_SCHEMA = pa.schema([
    pa.field("doc_id", pa.string(), nullable=False),
    pa.field("source_file", pa.string(), nullable=False),
    pa.field("concept", pa.string(), nullable=False),  # the filing's element name, e.g. us-gaap:Revenues
    pa.field("context", pa.string(), nullable=False),  # the filing's context id (with concept and unit, the fact)
    pa.field("period_start", pa.date32()),  # null for an instant
    pa.field("period_end", pa.date32()),
    pa.field("dimensions", pa.string()),  # "axis=member; ..." (null: the entity as a whole)
    pa.field("value", pa.decimal128(38, 10), nullable=False),  # in full units: the printed scale applied
    pa.field("unit", pa.string()),  # USD, shares, USD/shares, pure
    pa.field("scale_printed", pa.string()),  # thousands, millions, billions, percent (null: as printed)
    pa.field("page", pa.int32(), nullable=False),
    pa.field("method", pa.string(), nullable=False),  # xbrl: the filing's inline XBRL tags; table: a statement table
    pa.field("label", pa.string()),  # the printed row label a table fact was read from (null for xbrl)
    pa.field("confidence", pa.float64(), nullable=False),  # 1.0 for a tagged fact
])
