"""Length bucketing and the long-document policy."""

from __future__ import annotations

from pipeline.plan.bucketing import prepare_requests
from pipeline.plan.work import WorkUnit
from tests.helpers.fake_llm import ByteTokenizer

MAX_TOKENS = {"document": 20, "window": 20}


def _doc(i: int, n: int) -> WorkUnit:
    return WorkUnit(row_id=f"r{i:03d}", kind="document", source_files=[f"f{i}.pdf"], text="x" * n)


def test_buckets_are_sorted_homogeneous_and_bounded() -> None:
    units = [_doc(i, n) for i, n in enumerate([500, 10, 300, 20, 400, 30, 200])]
    prep = prepare_requests(units, ByteTokenizer(), 4096, MAX_TOKENS, bucket_size=3, bucket_tokens=100_000)
    lengths = [[it.n_tokens for it in b.items] for b in prep.buckets]
    flat = [n for b in lengths for n in b]
    assert flat == sorted(flat) and all(len(b) <= 3 for b in lengths)
    assert [b.bucket_id for b in prep.buckets] == ["document-00000", "document-00001", "document-00002"]


def test_token_budget_closes_a_bucket() -> None:
    units = [_doc(i, 300) for i in range(4)]
    prep = prepare_requests(units, ByteTokenizer(), 4096, MAX_TOKENS, bucket_size=32, bucket_tokens=1000)
    assert all(b.prompt_tokens <= 1000 for b in prep.buckets) and len(prep.buckets) >= 2


def test_bucketing_is_deterministic_regardless_of_input_order() -> None:
    units = [_doc(i, 50 + (i * 37) % 200) for i in range(20)]
    a = prepare_requests(units, ByteTokenizer(), 4096, MAX_TOKENS, bucket_size=4)
    b = prepare_requests(list(reversed(units)), ByteTokenizer(), 4096, MAX_TOKENS, bucket_size=4)
    assert [[i.unit.row_id for i in x.items] for x in a.buckets] == [[i.unit.row_id for i in x.items] for x in b.buckets]


def test_long_document_is_truncated_to_fit_and_flagged() -> None:
    prep = prepare_requests([_doc(0, 5000), _doc(1, 10)], ByteTokenizer(), 1024, MAX_TOKENS)
    items = {i.unit.row_id: i for b in prep.buckets for i in b.items}
    long, short = items["r000"], items["r001"]
    assert long.truncated and long.n_tokens <= 1024 - MAX_TOKENS["document"]
    assert long.n_tokens >= 1024 - MAX_TOKENS["document"] - 2  # cut close to the budget, not far below
    assert long.original_tokens > 5000 and not short.truncated
    # the row says how much of the text the model read: nothing is cut silently
    assert 0.1 < long.text_read_fraction < 0.25 and short.text_read_fraction == 1.0


def test_prompt_that_cannot_fit_is_an_error_row() -> None:
    window = WorkUnit(row_id="w", kind="window", source_files=["a.csv"], n_rows=7,
                      facts={"account": "A", "period_start": "2024-01-01", "period_end": "2024-01-31", "currency": "EUR",
                             "tx_count": 7, "credits": "1.00", "debits": "2.00", "net": "-1.00", "large_cash_count": 0,
                             "new_counterparty_count": 0, "structuring_count": 0, "foreign_count": 0})
    prep = prepare_requests([window], ByteTokenizer(), 64, MAX_TOKENS)
    assert not prep.buckets and prep.errors[0].error_class == "PromptTooLong" and prep.errors[0].n_rows == 7
