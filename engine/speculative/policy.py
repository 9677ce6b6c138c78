"""How many tokens each sequence drafts this step: its running acceptance rate against a cost model of the step.

A step of N query tokens costs about max(N, knee) + overhead + small * N token-equivalents: below the knee the
step is bound by reading the weights, so extra query tokens cost little; above it each costs a decoded token.
Draft j of a sequence whose drafts are accepted at rate a is emitted with probability a**j. Candidates are taken
best first while they raise the step's expected tokens per unit of cost, so speculation switches itself off when
the batch is compute-bound and the drafts would not pay (the seed's warning), and a sequence whose drafts keep
failing drafts less. Everything here is arithmetic on counts, never on timings, so the same inputs schedule the
same drafts (seeded sampling stays reproducible).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

# Acceptance is tracked as decayed counts of accepted and rejected drafts with a prior of PRIOR_ACCEPTED /
# (PRIOR_ACCEPTED + PRIOR_REJECTED), so a new sequence starts optimistic and a few verify steps overrule it.
PRIOR_ACCEPTED = 1.5
PRIOR_REJECTED = 1.0
DECAY = 0.8
# Share of a compute-bound token's cost a query token below the knee still costs (attention, sampling, rows).
SUB_KNEE_TOKEN_COST = 0.1


@dataclass
class Acceptance:
    accepted: float = PRIOR_ACCEPTED
    rejected: float = PRIOR_REJECTED

    def update(self, drafted: int, accepted: int) -> None:
        """One verify step: drafts are checked in order, so there is at most one rejection per step."""
        if drafted <= 0:
            return
        self.accepted = DECAY * self.accepted + accepted
        self.rejected = DECAY * self.rejected + (1 if accepted < drafted else 0)

    @property
    def rate(self) -> float:
        return self.accepted / (self.accepted + self.rejected)


@dataclass(frozen=True)
class StepCostModel:
    knee_tokens: int
    overhead_tokens: float
    # A draft model's size relative to the target's: its draft steps follow the same curve, scaled by this. The
    # j-th draft of any sequence is computed in the draft's j-th forward pass of the step.
    draft_scale: float = 0.0

    def cost(self, n_tokens: int) -> float:
        if n_tokens <= 0:
            return 0.0
        return max(n_tokens, self.knee_tokens) + self.overhead_tokens + SUB_KNEE_TOKEN_COST * n_tokens


def draft_lengths(rates: list[float], caps: list[int], sure_tokens: int, base_tokens: int, budget: int,
                  model: StepCostModel) -> list[int]:
    """Draft length per sequence (at most caps[i], in all at most `budget`).

    sure_tokens: tokens the step emits anyway (one per decoding sequence plus forced grammar tokens);
    base_tokens: query tokens the step computes anyway."""
    lengths = [0] * len(rates)
    heap = [(-rates[i], i, 1) for i in range(len(rates)) if caps[i] > 0 and rates[i] > 0]
    heapq.heapify(heap)
    expected, n = float(sure_tokens), base_tokens
    per_depth: dict[int, int] = {}  # draft forward j -> tokens it computes
    draft_cost = 0.0
    while heap and budget > 0:
        neg_value, i, j = heapq.heappop(heap)
        value = -neg_value
        cost = model.cost(n) + draft_cost
        at = per_depth.get(j, 0)
        added_draft = model.draft_scale * (model.cost(at + 1) - model.cost(at))
        added = model.cost(n + 1) - model.cost(n) + added_draft
        if expected > 0 and (expected + value) * cost < expected * (cost + added):
            break  # values only fall from here and costs only rise: nothing later pays either
        lengths[i] = j
        expected += value
        n += 1
        per_depth[j] = at + 1
        draft_cost += added_draft
        budget -= 1
        if j < caps[i]:
            heapq.heappush(heap, (-(value * rates[i]), i, j + 1))
    return lengths
