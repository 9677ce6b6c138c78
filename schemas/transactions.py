"""Canonical transaction table: the Arrow schema every ingested transaction log is normalised to."""

import pyarrow as pa

TRANSACTION_ARROW_SCHEMA = pa.schema(
    [
        pa.field("account", pa.string(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("amount", pa.decimal128(18, 4), nullable=False),  # negative = debit
        pa.field("currency", pa.string(), nullable=True),  # ISO 4217; null where the export states none
        pa.field("counterparty", pa.string(), nullable=True),
        pa.field("description", pa.string(), nullable=True),
        pa.field("source_file", pa.string(), nullable=False),  # relative to the input dir
        pa.field("source_row", pa.int64(), nullable=False),  # 1-based line/record number
    ]
)
