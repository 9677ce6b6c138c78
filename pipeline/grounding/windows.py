"""Narrowing an account window's decoding schema to what its facts support.

A flag names a count the facts state; a flag whose count is zero has no evidence, so it is ruled out, like a
document value its text never prints. The risk level is defined by the number of flags (low, medium, high for 0,
1, 2+), so a level above what the possible flags allow is ruled out too. The model still decides which flags
and which level; the facts only bound them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pipeline.plan.windows import FLAG_COUNTS
from schemas.account import FLAG_ORDER, RiskLevel

_LEVELS = (RiskLevel.LOW, RiskLevel.MEDIUM, RiskLevel.HIGH)


def supported_flags(facts: Mapping[str, object]) -> list[str]:
    """Flags whose count in the facts is above zero, in canonical order."""

    return [f.value for f in FLAG_ORDER if int(facts.get(FLAG_COUNTS[f], 0) or 0) > 0]  # type: ignore[call-overload]


def grounded_window_schema(schema: dict[str, Any], facts: Mapping[str, object]) -> dict[str, Any]:
    """A copy of the window decoding schema whose flags and risk level the facts can support."""
    flags = supported_flags(facts)
    out = copy.deepcopy(schema)
    props = out["properties"]
    if flags:
        props["flags"]["items"]["enum"] = flags
        props["flags"]["maxItems"] = len(flags)
    else:
        props["flags"] = {"type": "array", "maxItems": 0}
    props["risk_level"]["enum"] = [lv.value for lv in _LEVELS[: min(len(flags), 2) + 1]]
    return out
