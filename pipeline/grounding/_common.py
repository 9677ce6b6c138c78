"""Helpers the scanners share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.grounding.labels import STRONG, WEAK

LABELLED_TIERS = (STRONG, WEAK)

# Words of a street address in the languages read, and a street name run into its house number ("Uferweg 40"): a
# regular-expression fragment (no flags) for case-insensitive patterns. Neither a name nor a document number is on
# such a line.
STREET = (r"\b(?:street|st\.|road|rd\.?|avenue|ave\.?|lane|jalan|jln|taman|straße|strasse|str\.|weg|laan|rue|via|"
          r"calle|boulevard|blvd|suite|floor|building|po\s+box|postfach)\b|"
          r"[^\W\d_]{3,}(?:stra\u00dfe|strasse|weg|gasse|allee|platz|laan|straat)\s*\d")


@dataclass(frozen=True)
class Choice:
    """A field's candidates (best first), whether null is allowed, and how they were found."""

    values: tuple[str, ...]
    tier: str  # strong | weak | unlabelled | negative | proven | printed | inferred | none
    nullable: bool = False
    decided: bool = False  # one value from a labelled place (or a consistency check): no choice left to make
    why: str = ""  # what decided it, for a person reading the choice (e.g. "labelled total = net + tax")


def unique(values: Iterable[str]) -> list[str]:
    """Values in first-seen order, without repeats."""
    return list(dict.fromkeys(values))


def in_order(found: list[tuple[int, str]]) -> list[str]:
    """The values of (position, value) pairs in document order, without repeats."""
    return unique(v for _, v in sorted(found, key=lambda t: t[0]))
