"""Puts drafts on the decoding sequences before each step and learns from what verification accepted.

Per decoding sequence: the tokens its JSON-schema grammar forces come first (free drafts, no proposer), then
the proposer's tokens after them, cut where the grammar would reject one (they could never be accepted), and as
many as the draft-length policy finds worth their query tokens. Verification itself (greedy comparison or
rejection sampling), KV rollback and prefix-cache safety live in the engine's multi-token step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from engine.sequence import Sequence, Status
from engine.speculative.config import SpeculativeConfig
from engine.speculative.ngram import NgramIndex
from engine.speculative.policy import Acceptance, StepCostModel, draft_lengths


@dataclass
class SpecCounters:
    verify_steps: int = 0  # sequence-steps that verified at least one draft
    draft_tokens: int = 0  # drafts verified (forced grammar tokens included)
    accepted_tokens: int = 0
    forced_tokens: int = 0  # drafts that came from the grammar's fast-forward
    steps_drafted: int = 0  # engine steps in which some sequence drafted
    steps_declined: int = 0  # engine steps with decoding sequences where the policy drafted nothing

    def as_stats(self) -> dict[str, float | int]:
        return {
            "spec_verify_steps": self.verify_steps,
            "spec_draft_tokens": self.draft_tokens,
            "spec_accepted_tokens": self.accepted_tokens,
            "spec_forced_tokens": self.forced_tokens,
            "spec_acceptance_rate": self.accepted_tokens / self.draft_tokens if self.draft_tokens else 0.0,
            "spec_mean_accepted_length": self.accepted_tokens / self.verify_steps if self.verify_steps else 0.0,
            "spec_steps_drafted": self.steps_drafted,
            "spec_steps_declined": self.steps_declined,
        }


class DraftSource(Protocol):
    """A proposer that needs the draft lengths first (a draft model runs that many forward passes)."""

    def propose(self, seqs: list[Sequence], prefixes: list[list[int]], lengths: list[int],
                structured: Any) -> list[tuple[list[int], torch.Tensor | None]]: ...

    def release(self, keep: set[int]) -> None: ...


@dataclass
class _State:
    acceptance: Acceptance
    ngram: NgramIndex | None
    forced: int = 0  # how many of the current drafts are forced grammar tokens


class Speculator:
    def __init__(self, config: SpeculativeConfig, cost: StepCostModel, max_model_len: int,
                 draft_model: DraftSource | None = None) -> None:
        self.config = config
        self.cost = cost
        self.max_model_len = max_model_len
        self.draft_model = draft_model
        self.counters = SpecCounters()
        self._states: dict[int, _State] = {}  # id(seq) -> state, for running sequences only

    # ---- before a step ---------------------------------------------------------------------------------------
    def propose(self, running: list[Sequence], budget: int, structured: Any) -> None:
        live = {id(s) for s in running}
        self._states = {k: v for k, v in self._states.items() if k in live}
        if self.draft_model is not None:
            self.draft_model.release(live)
        decoding = [s for s in running if s.status is Status.RUNNING and not s.is_prefilling
                    and s.num_computed_tokens == s.num_tokens - 1 and s.finish_reason is None]
        if not decoding:
            return
        ids = {id(s) for s in decoding}
        other = sum(min(s.num_tokens - s.num_computed_tokens, budget) for s in running if id(s) not in ids)
        cfg, k_max = self.config, self.config.num_speculative_tokens
        caps, forced, rates, guesses = [], [], [], []
        for seq in decoding:
            st = self._state(seq)
            room = min(seq.params.max_tokens - seq.num_output_tokens, self.max_model_len - seq.num_tokens + 1) - 1
            ff = seq.matcher.forced_tokens()[:room] if (cfg.grammar_fast_forward and seq.matcher is not None
                                                        and room > 0) else []
            cap = max(0, min(k_max, room - len(ff)))
            guess: list[int] = []
            if st.ngram is not None and cap:
                guess = st.ngram.propose(seq.token_ids + ff if ff else seq.token_ids, cap)
                guess = self._grammar_prefix(seq, ff, guess)
                cap = len(guess)
            forced.append(ff)
            caps.append(cap)
            guesses.append(guess)
            rates.append(st.acceptance.rate)
        n_forced = sum(len(f) for f in forced)
        base = len(decoding) + n_forced + other
        room_in_budget = max(0, budget - base)
        if cfg.adaptive:
            lengths = draft_lengths(rates, caps, len(decoding) + n_forced, base, room_in_budget, self.cost)
        else:
            lengths, left = [], room_in_budget
            for c in caps:
                lengths.append(min(c, left))
                left -= lengths[-1]
        proposals: list[tuple[list[int], torch.Tensor | None]]
        if self.draft_model is not None:
            proposals = self.draft_model.propose(decoding, forced, lengths, structured)
        else:
            proposals = [(g[:k], None) for g, k in zip(guesses, lengths)]
        any_draft = False
        for seq, ff, (drafts, q) in zip(decoding, forced, proposals):
            self._states[id(seq)].forced = len(ff)
            seq.draft_ids = ff + drafts
            seq.draft_probs = None
            if q is not None:  # forced tokens are point masses in front of the draft model's distributions
                seq.draft_probs = q if not ff else torch.cat([_point_masses(ff, q.shape[1], q), q])
            any_draft = any_draft or bool(seq.draft_ids)
        if any_draft:
            self.counters.steps_drafted += 1
        else:
            self.counters.steps_declined += 1

    def _grammar_prefix(self, seq: Sequence, forced: list[int], drafts: list[int]) -> list[int]:
        """The leading drafts the grammar accepts after the forced tokens."""
        if seq.matcher is None or not drafts:
            return drafts
        done = seq.matcher.advance(forced)
        try:
            return drafts[: seq.matcher.valid_prefix(drafts)] if done == len(forced) else []
        finally:
            seq.matcher.rollback(done)

    def _state(self, seq: Sequence) -> _State:
        st = self._states.get(id(seq))
        if st is None:
            ngram = NgramIndex(*self.config.lookup_range) if self.config.method == "ngram" else None
            st = self._states[id(seq)] = _State(Acceptance(), ngram)
        return st

    # ---- after a step ----------------------------------------------------------------------------------------
    def observe(self, seq: Sequence, verified: int, accepted: int) -> None:
        """`verified` drafts were checked this step and the first `accepted` of them kept."""
        if verified <= 0:
            return
        c = self.counters
        c.verify_steps += 1
        c.draft_tokens += verified
        c.accepted_tokens += accepted
        m = seq.metrics
        m.num_verify_steps += 1
        m.num_draft_tokens += verified
        m.num_accepted_tokens += accepted
        st = self._states.get(id(seq))
        if st is None:
            return
        forced = min(st.forced, verified)
        c.forced_tokens += forced
        if accepted >= forced:  # the proposer's own drafts were reached: learn its acceptance rate
            st.acceptance.update(verified - forced, accepted - forced)


def _point_masses(tokens: list[int], vocab: int, like: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(len(tokens), vocab, dtype=like.dtype, device=like.device)
    out[torch.arange(len(tokens)), torch.tensor(tokens)] = 1
    return out
