"""Output: the transactional Parquet sink, the datasets' schemas, the run manifest and the report."""
