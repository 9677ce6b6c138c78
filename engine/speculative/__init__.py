"""Speculative decoding inside continuous batching: prompt lookup or a draft model proposes, grammar-forced
tokens come free, one target forward verifies every sequence's drafts over the paged KV.

config (what the user asks for) -> builder (proposer, draft model, cost model) -> speculator (drafts before each
step, learns acceptance after it) -> policy (draft lengths); rejection (verification of sampled drafts) is used by
the engine's sampler. Modules import from here only what they need, so the sampler does not pull in the builder.
"""

from engine.speculative.config import SpeculativeConfig

__all__ = ["SpeculativeConfig"]
