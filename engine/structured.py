"""JSON-schema constrained decoding backed by llguidance.

One `StructuredOutputBackend` per LLM owns the llguidance tokenizer (costly to build, ~1 s for a 50k vocab) and a
cache of compiled schemas; each constrained request gets a cheap `StructuredMatcher` copied from the cached template.

Masks are int32 bitmasks, one row per constrained request, `ceil(vocab_size / 32)` words wide (token `t` is allowed
iff bit `t % 32` of word `t // 32` is set). They are 32x smaller than bool masks, so filling on CPU and moving them to
the accelerator is cheap; `apply_mask` unpacks them on the logits' device.

The grammar only admits compact JSON (`,` and `:` separators, no whitespace) with object keys in the schema's
`properties` order, i.e. exactly what `json.dumps(model.model_dump(mode="json"), separators=(",", ":"))` produces.
"""

from __future__ import annotations

import json
import logging
import sys
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import llguidance
import numpy as np
import torch

log = logging.getLogger(__name__)

# Compiler options (applied as overrides, so a schema's own "x-guidance" cannot loosen them).
JSON_COMPILE_OPTIONS: Mapping[str, Any] = MappingProxyType({
    "whitespace_flexible": False,  # no whitespace anywhere: the demo model is trained on compact JSON
    "item_separator": ",",
    "key_separator": ":",
    "coerce_one_of": True,  # pydantic emits oneOf for discriminated unions; pydantic re-validates the result anyway
    # json.dumps defaults to ensure_ascii=True, so "\u20ac" style escapes must stay legal in plain strings.
    "json_allow_general_unicode_escapes": True,
})

_HMS = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?"
_OFFSET = r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
# llguidance's RFC 3339 formats reject what pydantic itself emits for naive datetimes/times ("2024-01-01T10:00:00")
# and for timedeltas ("PT1H1.5S"); these patterns accept pydantic's serialisation (pydantic validates the rest).
_FORMAT_PATTERNS: Mapping[str, str] = MappingProxyType({
    "date-time": rf"^[0-9]{{4}}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T{_HMS}{_OFFSET}?$",
    "time": rf"^{_HMS}{_OFFSET}?$",
    "duration": r"^-?P([0-9]+Y)?([0-9]+M)?([0-9]+W)?([0-9]+D)?(T([0-9]+H)?([0-9]+M)?([0-9]+(\.[0-9]+)?S)?)?$",
})
_SCHEMA_KEYS = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
                "unevaluatedProperties", "unevaluatedItems", "additionalItems")
_SCHEMA_LIST_KEYS = ("anyOf", "oneOf", "allOf", "prefixItems", "items")
_SCHEMA_MAP_KEYS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_COMBINATORS = ("allOf", "anyOf", "oneOf", "$ref")
_CACHE_SIZE = 128


@dataclass(frozen=True)
class _Compiled:
    """A compiled schema: a matcher in its start state to deep-copy from, or the reason compilation failed."""

    template: llguidance.LLMatcher | None
    error: str | None


class StructuredOutputBackend:
    """One per LLM: owns the llguidance tokenizer built once from tokenizer.json; compiles schemas with a cache."""

    def __init__(
        self,
        tokenizer_json: str,
        vocab_size: int,
        eos_token_ids: list[int],
        *,
        close_objects: bool = True,
        num_threads: int | None = None,
    ) -> None:
        """`vocab_size` is the logits width; ids the tokenizer lacks are never allowed.

        close_objects: add `additionalProperties: false` to object schemas that list `properties` and say nothing
        about extra keys (pydantic's default), so the model cannot wander into keys pydantic would ignore.
        num_threads: llguidance worker threads for batched mask fills (None = its default, 80% of the CPUs).
        """
        eos = [int(t) for t in eos_token_ids]
        if not eos:
            raise ValueError("structured output needs at least one EOS token id to end a constrained generation")
        if any(t < 0 or t >= vocab_size for t in eos):
            raise ValueError(f"EOS token ids {eos} must lie in [0, vocab_size={vocab_size})")
        try:
            self._tokenizer = llguidance.LLTokenizer(tokenizer_json, n_vocab=vocab_size, eos_token=eos)
        except ValueError as e:  # e.g. "vocab size too small; 100 vs 320"
            raise ValueError(f"cannot build the structured-output tokenizer: {e}") from e
        self.vocab_size = vocab_size
        self.eos_token_ids = eos
        self._eos = frozenset(eos)
        self.close_objects = close_objects
        self.mask_words = (vocab_size + 31) // 32
        self._executor = llguidance.LLExecutor(num_threads)
        self._limits = llguidance.LLParserLimits(verbose_errors=False)
        self._cache: OrderedDict[str, _Compiled] = OrderedDict()
        self._keyword_ok: dict[tuple[str, str], bool] = {}
        self._shifts: dict[torch.device, torch.Tensor] = {}

    # ---- schemas -------------------------------------------------------------------------------------------------

    def validate_schema(self, json_schema: dict[str, Any]) -> None:
        """Raise ValueError saying why if `json_schema` cannot constrain decoding."""
        compiled = self._compile(json_schema)
        if compiled.error is not None:
            raise ValueError(compiled.error)

    def new_matcher(self, json_schema: dict[str, Any]) -> StructuredMatcher:
        """Fresh per-request matcher in the start state; raises ValueError for an unusable schema."""
        compiled = self._compile(json_schema)
        if compiled.template is None:
            raise ValueError(compiled.error)
        return StructuredMatcher(compiled.template.deep_copy(), self._eos)

    def _compile(self, json_schema: dict[str, Any]) -> _Compiled:
        if not isinstance(json_schema, dict):
            return _Compiled(None, f"json_schema must be a dict, got {type(json_schema).__name__}")
        try:
            key = json.dumps(json_schema)  # not sort_keys: property order is part of the grammar
        except (TypeError, ValueError) as e:
            return _Compiled(None, f"json_schema is not JSON-serialisable: {e}")
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        compiled = self._build(json_schema)
        self._cache[key] = compiled
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return compiled

    def _build(self, json_schema: dict[str, Any]) -> _Compiled:
        prepared = self._prepare(json_schema, in_all_of=False)
        try:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(prepared, overrides=dict(JSON_COMPILE_OPTIONS))
        except ValueError as e:
            return _Compiled(None, f"invalid JSON schema for structured output: {e}")
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, self._tokenizer,
                                                                                 limits=self._limits)
        if is_error:
            return _Compiled(None, f"unsupported JSON schema for structured output: {'; '.join(messages)}")
        for msg in messages:
            log.warning("structured output schema warning: %s", msg)
        template = llguidance.LLMatcher(self._tokenizer, grammar, log_level=0, limits=self._limits)
        if template.is_error():
            return _Compiled(None, f"unsupported JSON schema for structured output: {template.get_error()}")
        return _Compiled(template, None)

    def _prepare(self, schema: Any, *, in_all_of: bool) -> Any:
        """Copy of `schema` with string formats made pydantic-compatible, unenforceable string keywords dropped and
        (optionally) plain objects closed.

        Walks only keywords that hold subschemas, so data such as `default`, `enum` or `examples` is never touched.
        Formats llguidance lacks (pydantic's "path", "password", "binary", ...) and patterns it cannot compile
        (look-arounds, back-references) would fail compilation; they are dropped here and left to pydantic
        validation after generation.
        """
        if not isinstance(schema, dict):
            return schema
        out: dict[str, Any] = {}
        for k, v in schema.items():
            if k in _SCHEMA_MAP_KEYS and isinstance(v, dict):
                out[k] = {name: self._prepare(sub, in_all_of=False) for name, sub in v.items()}
            elif k in _SCHEMA_LIST_KEYS and isinstance(v, list):
                out[k] = [self._prepare(sub, in_all_of=(k == "allOf")) for sub in v]
            elif k in _SCHEMA_KEYS and isinstance(v, dict):
                out[k] = self._prepare(v, in_all_of=False)
            elif k == "format" and isinstance(v, str) and v in _FORMAT_PATTERNS:
                if "pattern" not in schema:
                    out["pattern"] = _FORMAT_PATTERNS[v]
            elif k in ("format", "pattern") and isinstance(v, str) and not self._string_keyword_supported(k, v):
                continue
            else:
                out[k] = v
        if (
            self.close_objects
            and not in_all_of  # closing one branch of an intersection would reject the other branches' keys
            and "properties" in out
            and not any(k in out for k in ("additionalProperties", "patternProperties", "unevaluatedProperties"))
            and not any(k in out for k in _COMBINATORS)
        ):
            out["additionalProperties"] = False
        return out

    def _string_keyword_supported(self, keyword: str, value: str) -> bool:
        """Whether llguidance can enforce this string `format` / `pattern` (probed once per value)."""
        ok = self._keyword_ok.get((keyword, value))
        if ok is None:
            grammar = llguidance.LLMatcher.grammar_from_json_schema({"type": "string", keyword: value})
            is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
            ok = not is_error
            if not ok:
                log.warning("structured output: %s %r is not enforced while decoding, only by validation after (%s)",
                            keyword, value, "; ".join(messages))
            self._keyword_ok[(keyword, value)] = ok
        return ok

    # ---- masks ---------------------------------------------------------------------------------------------------

    def allocate_mask(self, batch: int) -> torch.Tensor:
        """CPU int32 bitmask [batch, ceil(vocab_size/32)] (pinned when CUDA is available, for async copies)."""
        pin = torch.cuda.is_available()
        return torch.zeros((batch, self.mask_words), dtype=torch.int32, pin_memory=pin)

    def fill_masks(self, matchers: Sequence[StructuredMatcher], mask: torch.Tensor) -> None:
        """Row k of `mask` := allowed set of `matchers[k]`, computed in parallel by llguidance (GIL released)."""
        self._check_mask(mask, len(matchers))
        if not matchers:
            return
        pairs = [(m._matcher, k) for k, m in enumerate(matchers)]
        self._executor.unsafe_compute_mask_ptr(pairs, mask.data_ptr(), self.mask_words * 4, mask.shape[0])

    def fill_masks_after_drafts(self, entries: Sequence[tuple[StructuredMatcher, int, list[int]]],
                                mask: torch.Tensor) -> None:
        """For (matcher, row, drafts): row + j := the allowed set after the matcher's state plus drafts[:j], for j in
        0..len(drafts), in parallel; every matcher ends in the state it started in (llguidance rolls back).

        Rows past a draft the grammar rejects are left all-allowed: verification rejects that draft anyway, so
        what follows it is never emitted."""
        rows = sum(len(d) + 1 for _, _, d in entries)
        self._check_mask(mask, rows)
        if not entries:
            return
        for _, row, drafts in entries:
            if drafts:
                mask[row + 1 : row + 1 + len(drafts)] = -1
        plain = [(m._matcher, row) for m, row, drafts in entries if not drafts]
        triples = [(m._matcher, row, [int(t) for t in drafts]) for m, row, drafts in entries if drafts]
        if plain:  # llguidance refuses an empty draft list
            self._executor.unsafe_compute_mask_ptr(plain, mask.data_ptr(), self.mask_words * 4, mask.shape[0])
        if triples:
            self._executor.unsafe_compute_mask_ptr_with_draft_token(triples, mask.data_ptr(), self.mask_words * 4,
                                                                    mask.shape[0])

    def apply_mask(self, logits: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor | Sequence[int] | None = None
                   ) -> None:
        """Set disallowed logits to -inf in place.

        Mask row k applies to logits row `rows[k]` (all rows in order when `rows` is None); other rows are untouched.
        Columns past the tokenizer's vocabulary (and past `vocab_size`) are never allowed.
        """
        n = len(rows) if rows is not None else logits.shape[0]
        if logits.dim() != 2 or logits.shape[1] < self.vocab_size:
            raise ValueError(f"logits must be [batch, >= {self.vocab_size}], got {tuple(logits.shape)}")
        if mask.dim() != 2 or mask.shape[0] < n or mask.shape[1] != self.mask_words or mask.dtype != torch.int32:
            raise ValueError(f"mask must be int32 [>= {n}, {self.mask_words}], got {mask.dtype} {tuple(mask.shape)}")
        if n == 0:
            return
        # Unpack the complement, so set bits mean "disallowed" and no extra inversion pass over [n, vocab] is needed.
        if logits.device.type == "cpu":
            banned = _unpack_np(~mask[:n])
        else:
            # Ship the 32x smaller bitmask and unpack on the device. The copy is async from pinned memory, so the
            # caller must not refill `mask` before the step's results are read back (the next fill needs them anyway).
            banned = self._unpack_shift(~mask[:n].to(logits.device, non_blocking=True))
        width = logits.shape[1]
        if width > banned.shape[1]:  # logits wider than the mask: the extra columns are never allowed
            banned = torch.nn.functional.pad(banned, (0, width - banned.shape[1]), value=True)
        elif width < banned.shape[1]:
            banned = banned[:, :width]
        if rows is None:
            logits[:n].masked_fill_(banned, float("-inf"))
            return
        idx = torch.as_tensor(rows, dtype=torch.long, device=logits.device)
        sub = logits.index_select(0, idx)
        sub.masked_fill_(banned, float("-inf"))
        logits.index_copy_(0, idx, sub)

    def _unpack_shift(self, mask: torch.Tensor) -> torch.Tensor:
        """int32 bitmask [n, words] -> bool [n, words * 32] on the mask's device (bit t%32 of word t//32 is t)."""
        shifts = self._shifts.get(mask.device)
        if shifts is None:
            shifts = torch.arange(32, dtype=torch.int32, device=mask.device)
            self._shifts[mask.device] = shifts
        return ((mask.unsqueeze(-1) >> shifts) & 1).bool().view(mask.shape[0], -1)

    def _check_mask(self, mask: torch.Tensor, rows: int) -> None:
        if (mask.dtype != torch.int32 or mask.device.type != "cpu" or mask.dim() != 2
                or mask.shape[1] != self.mask_words or mask.shape[0] < rows or not mask.is_contiguous()):
            raise ValueError(f"mask must be a contiguous CPU int32 tensor [>= {rows}, {self.mask_words}] "
                             f"(use allocate_mask), got {mask.dtype} {tuple(mask.shape)} on {mask.device}")


def _unpack_np(mask: torch.Tensor) -> torch.Tensor:
    """CPU int32 bitmask [n, words] -> bool [n, words * 32]; numpy's unpackbits is much faster than torch shifts
    (docs/bench/design-choices.md)."""
    if sys.byteorder != "little":  # the uint8 view below assumes little-endian words
        return ((mask.unsqueeze(-1) >> torch.arange(32, dtype=torch.int32)) & 1).bool().view(mask.shape[0], -1)
    bits = np.unpackbits(np.ascontiguousarray(mask.numpy()).view(np.uint8), axis=1, bitorder="little")
    return torch.from_numpy(bits).view(torch.bool)


class StructuredMatcher:
    """Grammar state of one constrained request."""

    def __init__(self, matcher: llguidance.LLMatcher, eos_token_ids: frozenset[int]) -> None:
        self._matcher = matcher
        self._eos = eos_token_ids

    def fill_allowed(self, mask: torch.Tensor, row: int) -> None:
        """Write this request's allowed next tokens into row `row` of a bitmask from `allocate_mask`.

        For a batch prefer `StructuredOutputBackend.fill_masks` (parallel). In the error state only EOS is allowed,
        so the request can end; check `error` after a step.
        """
        if mask.dtype != torch.int32 or mask.device.type != "cpu" or mask.dim() != 2 or not 0 <= row < mask.shape[0]:
            raise ValueError(f"mask must be a CPU int32 [batch, words] tensor with row {row} in range")
        view = mask[row]
        if not view.is_contiguous():
            raise ValueError("mask rows must be contiguous (use StructuredOutputBackend.allocate_mask)")
        self._matcher.unsafe_compute_mask_ptr(view.data_ptr(), view.numel() * 4)

    def accept(self, token_id: int) -> None:
        """Advance by the sampled token; raise ValueError (leaving the state unchanged) if it is not allowed."""
        if self._matcher.is_error():
            raise ValueError(f"structured output matcher is in an error state: {self._matcher.get_error()}")
        token_id = int(token_id)
        if token_id in self._eos:  # try_consume_tokens refuses EOS once the grammar has stopped, so handle it here
            if self._matcher.is_accepting() and self._matcher.consume_token(token_id):
                return
        elif self._matcher.try_consume_tokens([token_id]) == 1:
            return
        raise ValueError(f"token {token_id} is not allowed by the JSON schema at this point")

    def forced_tokens(self) -> list[int]:
        """Tokens the grammar forces next (llguidance's fast-forward tokens); [] when it leaves a choice."""
        if self._matcher.is_error() or self._matcher.is_stopped():
            return []
        return list(self._matcher.compute_ff_tokens())

    def valid_prefix(self, tokens: list[int]) -> int:
        """How many leading `tokens` the grammar accepts from the current state (the state does not change)."""
        if not tokens or self._matcher.is_error():
            return 0
        return int(self._matcher.validate_tokens([int(t) for t in tokens]))

    def advance(self, tokens: list[int]) -> int:
        """Tentatively consume tokens (a draft being built); returns how many were consumed. Undo with `rollback`."""
        if not tokens or self._matcher.is_error():
            return 0
        return int(self._matcher.try_consume_tokens([int(t) for t in tokens]))

    def rollback(self, n: int) -> None:
        if n > 0 and not self._matcher.rollback(n):
            raise RuntimeError(f"structured output matcher could not roll back {n} tokens: {self._matcher.get_error()}")

    def is_finished(self) -> bool:
        """True once the JSON is complete and nothing but EOS may follow (also after EOS was accepted)."""
        return self._matcher.is_stopped() and not self._matcher.is_error()

    @property
    def error(self) -> str | None:
        return self._matcher.get_error() if self._matcher.is_error() else None
