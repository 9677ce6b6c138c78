"""Helpers the scanners share."""

from __future__ import annotations

from collections.abc import Iterable


def unique(values: Iterable[str]) -> list[str]:
    """Values in first-seen order, without repeats."""
    return list(dict.fromkeys(values))


def in_order(found: list[tuple[int, str]]) -> list[str]:
    """The values of (position, value) pairs in document order, without repeats."""
    return unique(v for _, v in sorted(found, key=lambda t: t[0]))
