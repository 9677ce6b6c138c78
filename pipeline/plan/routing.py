"""Which engine serves a request: a document whose KV does not fit one engine's cache goes to the context-parallel
engine (`--context-parallel N`: its KV and attention split over N ranks) instead of failing.

    route_long(buckets, capacity_tokens) -> (buckets for the ordinary engine, buckets for the context-parallel one)

A request needs KV for its prompt and its answer (prompt tokens + max_tokens). Truncation is not involved: a
prompt longer than the model's positions was already cut to them (`truncated=true`, pipeline.plan.bucketing); routing
only decides where the rest runs. The capacity comes from the loaded engine and enters the run key, so a resumed
run routes every item the same way.
"""

from __future__ import annotations

from dataclasses import replace

from pipeline.plan.bucketing import Bucket, WorkItem


def needs_context_parallel(item: WorkItem, capacity_tokens: int) -> bool:
    return item.n_tokens + item.max_tokens > capacity_tokens


def route_long(buckets: list[Bucket], capacity_tokens: int, bucket_size: int = 1) -> tuple[list[Bucket], list[Bucket]]:
    """Move the items that do not fit `capacity_tokens` of KV out of their buckets into buckets of their own
    (`<kind>-cp-NNNNN`, at most `bucket_size` items each, in the original order, each marked with its route);
    emptied buckets are dropped.
    Deterministic for the same buckets and capacity."""
    ordinary: list[Bucket] = []
    long_items: dict[str, list[WorkItem]] = {}
    for b in buckets:
        keep = [i for i in b.items if not needs_context_parallel(i, capacity_tokens)]
        for i in b.items:
            if needs_context_parallel(i, capacity_tokens):
                long_items.setdefault(b.kind, []).append(replace(i, route="context_parallel"))
        if keep:
            ordinary.append(Bucket(b.bucket_id, b.kind, keep))
    long_buckets = [Bucket(f"{kind}-cp-{n // bucket_size:05d}", kind, items[n : n + bucket_size])
                    for kind, items in sorted(long_items.items()) for n in range(0, len(items), bucket_size)]
    return ordinary, long_buckets
