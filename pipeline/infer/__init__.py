"""Infer: running the planned buckets on the engine (in process or on Ray actors), then validating and scoring what comes back."""
