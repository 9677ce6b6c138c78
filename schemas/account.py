"""Account-window summary: the model's verdict on one account over one period.

Every field is decidable from the aggregates the prompt states (computed with polars in
`pipeline.plan.windows`), so the model never does arithmetic and the gold is a pure function
of those aggregates.
"""

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, field_validator


class WindowClassification(str, Enum):
    """Direction of the window's net flow in the account currency."""

    NET_INFLOW = "net_inflow"
    NET_OUTFLOW = "net_outflow"


class RiskLevel(str, Enum):
    """low: no flag; medium: one flag; high: two or more flags."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Flag(str, Enum):
    """Monitoring flags, listed in this canonical order when several apply."""

    LARGE_CASH = "large_cash"
    NEW_COUNTERPARTIES = "new_counterparties"
    STRUCTURING = "structuring"
    FOREIGN_CURRENCY = "foreign_currency"


FLAG_ORDER: tuple[Flag, ...] = tuple(Flag)


class AccountWindowSummary(BaseModel):
    """Classification, risk level, flags and a templated narrative for one account window."""

    model_config = ConfigDict(extra="forbid")

    classification: WindowClassification
    risk_level: RiskLevel
    flags: list[Flag] = Field(max_length=len(FLAG_ORDER), description="canonical order, no repeats")
    narrative: str = Field(min_length=1, max_length=300)

    @field_validator("flags")
    @classmethod
    def _canonical_flags(cls, flags: list[Flag]) -> list[Flag]:
        """Reject repeats and non-canonical order so equal flag sets compare equal."""
        if len(set(flags)) != len(flags):
            raise ValueError("flags must not repeat")
        if flags != sorted(flags, key=FLAG_ORDER.index):
            raise ValueError(f"flags must follow the order {[f.value for f in FLAG_ORDER]}")
        return flags


WINDOW_FIELDS: tuple[str, ...] = tuple(AccountWindowSummary.model_fields)
