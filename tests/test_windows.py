"""Window aggregates (polars) and the reference summary rule the model is trained to follow."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pyarrow as pa

from pipeline.plan.prompts import render_window_prompt
from pipeline.plan.windows import reference_summary, window_facts
from schemas import TRANSACTION_ARROW_SCHEMA

ACC = "DE89370400440532013000"


def _table(rows: list[tuple]) -> pa.Table:
    cols = {name: [] for name in TRANSACTION_ARROW_SCHEMA.names}
    for i, (acc, day, amount, ccy, cp, desc) in enumerate(rows, start=1):
        cols["account"].append(acc)
        cols["timestamp"].append(datetime(2024, day[0], day[1], 12, tzinfo=timezone.utc))
        cols["amount"].append(Decimal(amount))
        cols["currency"].append(ccy)
        cols["counterparty"].append(cp)
        cols["description"].append(desc)
        cols["source_file"].append("t.csv")
        cols["source_row"].append(i)
    return pa.table(cols, schema=TRANSACTION_ARROW_SCHEMA)


ROWS = [
    # March: salary, rent, a large cash deposit, two structuring-like deposits, a foreign card payment
    (ACC, (3, 1), "3000.00", "EUR", "Employer AG", "Salary"),
    (ACC, (3, 2), "-900.10", "EUR", "Landlord", "Rent"),
    (ACC, (3, 5), "12000.00", "EUR", None, "Cash deposit"),
    (ACC, (3, 6), "9500.00", "EUR", None, "CASH DEPOSIT branch"),
    (ACC, (3, 7), "9900.00", "EUR", None, "cash in"),
    (ACC, (3, 8), "9950.50", "EUR", None, "Cash deposit"),  # not round: not structuring
    (ACC, (3, 9), "-40.00", "USD", "Shop NY", "Card payment abroad"),
    # April: the same counterparties again, plus a large new one; net outflow
    (ACC, (4, 1), "3000.00", "EUR", "Employer AG", "Salary"),
    (ACC, (4, 2), "-900.10", "EUR", "Landlord", "Rent"),
    (ACC, (4, 20), "-7000.00", "EUR", "New Supplier BV", "Wire transfer"),
    (ACC, (4, 21), "-20000.00", "EUR", None, "ATM withdrawal"),
]


def test_window_facts_count_and_sum_exactly():
    march, april = window_facts(_table(ROWS))
    assert march == {
        "account": ACC, "period_start": "2024-03-01", "period_end": "2024-03-31", "currency": "EUR", "tx_count": 7,
        "credits": "44350.50", "debits": "900.10", "net": "43450.40", "large_cash_count": 1,
        "new_counterparty_count": 0, "structuring_count": 2, "foreign_count": 1,
    }
    assert april["period_end"] == "2024-04-30"
    assert (april["credits"], april["debits"], april["net"]) == ("3000.00", "27900.10", "-24900.10")
    assert april["new_counterparty_count"] == 1  # New Supplier BV: first seen, volume >= 5000
    assert april["large_cash_count"] == 1 and april["structuring_count"] == 0 and april["foreign_count"] == 0


def test_windows_are_per_account_and_sorted():
    other = "FR7630006000011234567890189"
    rows = ROWS + [(other, (2, 3), "10.00", "EUR", "X", "Transfer")]
    facts = window_facts(_table(rows))
    assert [(f["account"], f["period_start"]) for f in facts] == [
        (ACC, "2024-03-01"), (ACC, "2024-04-01"), (other, "2024-02-01")]
    assert window_facts(_table([])) == []


def test_reference_summary_rule():
    march, april = window_facts(_table(ROWS))
    s = reference_summary(march)
    assert s.classification.value == "net_inflow"
    assert [f.value for f in s.flags] == ["large_cash", "structuring", "foreign_currency"]
    assert s.risk_level.value == "high"
    assert s.narrative == ("7 transactions; credits 44350.50 EUR; debits 900.10 EUR; "
                           "flagged for large cash, structuring, foreign currency.")
    a = reference_summary(april)
    assert a.classification.value == "net_outflow" and a.risk_level.value == "high"
    quiet = {**april, "large_cash_count": 0, "new_counterparty_count": 0}
    assert reference_summary(quiet).risk_level.value == "low"
    assert reference_summary(quiet).narrative.endswith("no flags.")
    assert reference_summary({**quiet, "foreign_count": 3}).risk_level.value == "medium"


def test_a_window_fingerprint_is_its_set_of_rows_whatever_their_order_or_slices(tmp_path) -> None:
    """A window's id carries the fingerprint of its rows: the same rows give the same window, read in any order,
    whole or from a spool in slices of two rows; a row less gives another. (It used to sort every id of the run in
    memory; now it is built slice by slice.)"""
    import pyarrow.parquet as pq

    from pipeline.identity import RunIdentity
    from pipeline.ingest.stream_log import SPOOL_SCHEMA
    from pipeline.ingest.transactions import transaction_row_id
    from pipeline.plan.work import window_units

    identity, sha = RunIdentity("m@1", "p1", "s1"), {"t.csv": "a" * 64}
    table = _table(ROWS)

    def prints(units) -> dict[str, tuple[str, str]]:
        return {str(u.facts["period_start"]): (u.context["tx_fingerprint"], u.row_id) for u in units}

    whole = prints(window_units(table, sha, identity))
    assert len(whole) == 2 and prints(window_units(table.take(list(range(len(ROWS)))[::-1]), sha, identity)) == whole
    spool = tmp_path / "spool.parquet"
    ids = pa.array([transaction_row_id(sha["t.csv"], r) for r in table.column("source_row").to_pylist()], pa.string())
    with pq.ParquetWriter(str(spool), SPOOL_SCHEMA) as w:
        for start in range(0, len(ROWS), 2):
            w.write_table(table.add_column(0, SPOOL_SCHEMA.field("row_id"), ids).slice(start, 2))
    spooled = type("Spooled", (), {"path": str(spool)})()
    assert prints(window_units(TRANSACTION_ARROW_SCHEMA.empty_table(), sha, identity, spooled=[spooled])) == whole
    fewer = prints(window_units(table.slice(1), sha, identity))
    assert fewer["2024-03-01"] != whole["2024-03-01"] and fewer["2024-04-01"] == whole["2024-04-01"]


def test_partials_merged_along_the_way_give_the_facts_of_the_whole() -> None:
    """A long log's slices are aggregated into partials that are merged every few slices (so they stay one row
    per key); merged, partly merged or not, the facts are those of the whole table."""
    import polars as pl

    from pipeline.plan.windows import merge_partials, window_facts_from_partials, window_partials

    table = _table(ROWS)
    slices = [window_partials(table.slice(i, 2)) for i in range(0, table.num_rows, 2)]
    whole = window_facts(table)
    assert window_facts_from_partials(merge_partials(slices)) == whole
    assert window_facts_from_partials(pl.concat([merge_partials(slices[:2]), *slices[2:]])) == whole
    assert merge_partials(slices).height < sum(s.height for s in slices)


def test_a_window_of_an_export_that_states_no_currency_sums_its_rows_and_names_no_currency():
    rows = [(ACC, (3, 1), "100.00", None, "A", "in"), (ACC, (3, 2), "-30.00", None, "B", "out"),
            ("OTHER", (3, 3), "5.00", "EUR", "C", "in"), ("OTHER", (3, 4), "7.00", None, "D", "in")]
    unknown, other = window_facts(_table(rows))
    assert (unknown["currency"], unknown["credits"], unknown["debits"], unknown["foreign_count"]) == (
        None, "100.00", "30.00", 0)
    # an unknown currency beside a known one is not the account's currency: counted apart, never summed into it
    assert other["tx_count"] == 2 and other["foreign_count"] == 1 and other["credits"] in ("5.00", "7.00")
    assert reference_summary(unknown).narrative == "2 transactions; credits 100.00; debits 30.00; no flags."
    assert "\ncurrency: not stated\n" in render_window_prompt(unknown)
