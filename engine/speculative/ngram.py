"""Prompt lookup: draft the tokens that followed the latest earlier occurrence of the sequence's last n tokens.

Extraction output copies spans of its document (names, numbers, IBANs), so the continuation of a matching n-gram
in the prompt is often exactly what the model writes next. Each sequence keeps an index from every n-gram it has
seen to where it last ended, extended by the tokens appended since the previous call: O(new tokens) per step,
not O(length).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Index:
    ends: dict[tuple[int, ...], int] = field(default_factory=dict)  # n-gram -> end (exclusive) of its latest copy
    upto: int = 0  # n-grams ending at positions < upto are indexed
    length: int = 0  # how many tokens the index was built over (a shorter sequence means it was rolled back)


class NgramIndex:
    """The lookup state of one sequence."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi
        self._ix = _Index()

    def propose(self, tokens: list[int], k: int) -> list[int]:
        """Up to k tokens following the latest earlier occurrence of the longest suffix n-gram (hi down to lo)
        of `tokens`; [] when none occurs."""
        n_tok = len(tokens)
        if n_tok < self._ix.length:  # tokens were taken back: the index may name positions that changed
            self._ix = _Index()
        self._extend(tokens, n_tok - 1)  # every n-gram ending before the last token's end, not the suffix itself
        self._ix.length = n_tok
        for n in range(min(self.hi, n_tok - 1), self.lo - 1, -1):
            end = self._ix.ends.get(tuple(tokens[n_tok - n :]))
            if end is not None:
                return tokens[end : end + k]
        return []

    def _extend(self, tokens: list[int], upto: int) -> None:
        ends, lo, hi = self._ix.ends, self.lo, self.hi
        for e in range(self._ix.upto, upto):  # n-grams ending at e (exclusive end e + 1)
            for n in range(lo, min(hi, e + 1) + 1):
                ends[tuple(tokens[e + 1 - n : e + 1])] = e + 1
        self._ix.upto = max(self._ix.upto, upto)
