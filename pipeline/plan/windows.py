"""Per-account, per-month window aggregates (polars) and the reference summary rule.

All arithmetic and counting happens here; the model only reads the stated facts and maps
them to a verdict. `reference_summary` is that mapping written as code: it produces the
gold labels for training and evaluation.
"""

from decimal import Decimal

import polars as pl
import pyarrow as pa

from schemas.account import (
    FLAG_ORDER,
    AccountWindowSummary,
    Flag,
    RiskLevel,
    WindowClassification,
)

LARGE_CASH_THRESHOLD = 10_000
NEW_COUNTERPARTY_MIN_VOLUME = 5_000
STRUCTURING_LOW = 9_000  # round cash credits in [9000, 10000) sit just under the reporting threshold
CASH_PATTERN = r"(?i)\b(cash|atm)\b"

_CENT = Decimal("0.01")
FACT_PRECISION, FACT_SCALE = 18, 2  # credits, debits and net are stored as decimal128(18, 2)
_FACT_LIMIT = Decimal(10) ** (FACT_PRECISION - FACT_SCALE)


def _fmt(value: object) -> str:
    return f"{Decimal(str(value or 0)).quantize(_CENT):.2f}"


_PARTIAL_KEYS = ("account", "period_start", "currency", "counterparty")
_SUM = pl.Decimal(38, 4)  # partial sums of any slice concatenate with one type


def window_partials(transactions: pa.Table | pl.DataFrame) -> pl.DataFrame:
    """Stage one of the window aggregation, for any slice of the transactions: per (account, month, currency,
    counterparty) the row count, credits, debits, absolute volume and the cash-rule counts. Partials of
    different slices add up (`window_facts_from_partials`), so a log of any size is aggregated batch by batch."""
    df = transactions if isinstance(transactions, pl.DataFrame) else pl.from_arrow(transactions)
    amt = pl.col("amount").cast(pl.Float64)
    cash = pl.col("description").fill_null("").str.contains(CASH_PATTERN)
    return _owned(
        df.with_columns(pl.col("timestamp").dt.truncate("1mo").dt.date().alias("period_start"))
        .group_by(_PARTIAL_KEYS)
        .agg(
            pl.len().alias("n"),
            pl.col("amount").filter(amt > 0).sum().cast(_SUM).alias("credits"),
            (-pl.col("amount").filter(amt < 0)).sum().cast(_SUM).alias("debits"),
            pl.col("amount").abs().sum().cast(_SUM).alias("volume"),
            (cash & (amt.abs() >= LARGE_CASH_THRESHOLD)).sum().alias("large_cash"),
            (cash & (amt >= STRUCTURING_LOW) & (amt < LARGE_CASH_THRESHOLD) & ((amt % 100).abs() < 1e-6))
            .sum().alias("structuring"),
        )
    )


def merge_partials(partials: list[pl.DataFrame]) -> pl.DataFrame:
    """Partials of several slices as one (they add up): a long log keeps one partial row per key, not one per key
    and slice."""
    merged = pl.concat(partials).group_by(_PARTIAL_KEYS).agg(pl.exclude(_PARTIAL_KEYS).sum())
    return _owned(merged.select(partials[0].columns).cast(dict(partials[0].schema)))


def _owned(df: pl.DataFrame) -> pl.DataFrame:
    """`df` in buffers of its own. A polars group-by's string keys are views into its input's buffers, so a small
    partial kept a whole slice's strings alive (a 3 GB log's partials held ~2 GB); a copy through Arrow's
    plain string layout breaks the link."""
    return pl.from_arrow(df.to_arrow(compat_level=pl.CompatLevel.oldest()))  # type: ignore[return-value]


def window_facts_from_partials(partials: pl.DataFrame) -> list[dict[str, object]]:
    """Stage two: one fact row per (account, calendar month) from the partials of all slices.

    Totals are in the account's primary currency (its most frequent one); other currencies
    only count towards `foreign_count`. Rows are sorted by account then period.
    """
    if partials.is_empty():
        return []
    primary = (
        partials.group_by("account", "currency").agg(pl.col("n").sum().alias("len"))
        .sort(["account", "len", "currency"], descending=[False, True, False])
        .group_by("account", maintain_order=True).first()
        .select("account", pl.col("currency").alias("_primary"))
    )
    df = partials.join(primary, on="account")
    with_cp = df.filter(pl.col("counterparty").is_not_null())
    first_seen = with_cp.group_by("account", "counterparty").agg(pl.col("period_start").min().alias("_first"))
    new_cp = (
        with_cp.group_by("account", "period_start", "counterparty").agg(pl.col("volume").sum().alias("_vol"))
        .join(first_seen, on=["account", "counterparty"])
        .filter((pl.col("_first") == pl.col("period_start"))
                & (pl.col("_vol").cast(pl.Float64) >= NEW_COUNTERPARTY_MIN_VOLUME))
        .group_by("account", "period_start").agg(pl.len().alias("new_counterparty_count"))
    )
    in_primary = pl.col("currency").eq_missing(pl.col("_primary"))  # an export that states no currency: null
    agg = (
        df.group_by("account", "period_start")
        .agg(
            pl.col("_primary").first().alias("currency"),
            pl.col("n").sum().alias("tx_count"),
            pl.col("credits").filter(in_primary).sum().alias("_credits"),
            pl.col("debits").filter(in_primary).sum().alias("_debits"),
            pl.col("large_cash").sum().alias("large_cash_count"),
            pl.col("structuring").sum().alias("structuring_count"),
            pl.col("n").filter(~in_primary).sum().alias("foreign_count"),
        )
        .join(new_cp, on=["account", "period_start"], how="left")
        .with_columns(pl.col("new_counterparty_count").fill_null(0))
        .sort("account", "period_start")
    )
    rows = []
    for r in agg.iter_rows(named=True):
        start = r["period_start"]
        end = (pl.Series([start]).dt.month_end()[0])
        credits = Decimal(str(r["_credits"] or 0))
        debits = Decimal(str(r["_debits"] or 0))
        rows.append({
            "account": r["account"],
            "period_start": start.isoformat(),
            "period_end": end.isoformat(),
            "currency": r["currency"],
            "tx_count": int(r["tx_count"]),
            "credits": _fmt(credits),
            "debits": _fmt(debits),
            "net": _fmt(credits - debits),
            "large_cash_count": int(r["large_cash_count"]),
            "new_counterparty_count": int(r["new_counterparty_count"]),
            "structuring_count": int(r["structuring_count"]),
            "foreign_count": int(r["foreign_count"]),
        })
    return rows


def window_facts(transactions: pa.Table | pl.DataFrame) -> list[dict[str, object]]:
    """One fact row per (account, calendar month) of transactions held in memory (both stages at once)."""
    return window_facts_from_partials(window_partials(transactions))


def out_of_range(facts: dict[str, object]) -> str | None:
    """Why a window's sums do not fit their declared decimal type, or None. Each row fits its own type, but
    enough of them in one account-month can sum beyond it; such a window must fail before inference, not when
    its row is written."""
    bad = [f"{k} {facts[k]}" for k in ("credits", "debits", "net") if abs(Decimal(str(facts[k]))) >= _FACT_LIMIT]
    if not bad:
        return None
    return f"{', '.join(bad)} do not fit decimal({FACT_PRECISION},{FACT_SCALE}) (|value| < 1e{FACT_PRECISION - FACT_SCALE})"


FLAG_COUNTS = {
    Flag.LARGE_CASH: "large_cash_count",
    Flag.NEW_COUNTERPARTIES: "new_counterparty_count",
    Flag.STRUCTURING: "structuring_count",
    Flag.FOREIGN_CURRENCY: "foreign_count",
}


def reference_summary(facts: dict[str, object]) -> AccountWindowSummary:
    """The rule the model learns: flags from non-zero counts, risk from the flag count."""
    flags = [f for f in FLAG_ORDER if int(facts[FLAG_COUNTS[f]]) > 0]  # type: ignore[arg-type]
    risk = RiskLevel.LOW if not flags else RiskLevel.MEDIUM if len(flags) == 1 else RiskLevel.HIGH
    net = str(facts["net"])
    cls = WindowClassification.NET_OUTFLOW if net.startswith("-") else WindowClassification.NET_INFLOW
    ccy = f" {facts['currency']}" if facts["currency"] else ""  # none where the export states none
    tail = "no flags." if not flags else "flagged for " + ", ".join(f.value.replace("_", " ") for f in flags) + "."
    narrative = (f"{facts['tx_count']} transactions; credits {facts['credits']}{ccy}; "
                 f"debits {facts['debits']}{ccy}; {tail}")
    return AccountWindowSummary(classification=cls, risk_level=risk, flags=flags, narrative=narrative)
