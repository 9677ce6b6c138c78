"""Tokenise prompts, apply the long-document policy, and group requests into length buckets.

    prepare_requests(units, tokenizer, max_model_len, max_tokens={"document": n, "window": m},
                     bucket_size=32, bucket_tokens=32768) -> PreparedRequests

Sorting by token length and submitting homogeneous buckets keeps prefill work per step even and
lets a bucket finish together; buckets are deterministic for a given set of units, which is what
makes a killed-and-resumed run produce exactly the rows of an uninterrupted one.

Long-document policy (declared, flagged): a prompt that does not fit `max_model_len - max_tokens`
has its document text cut from the end until it fits; the output row says `truncated=true`.
A prompt that fits the model but not the engine's KV cache is not cut: with `--context-parallel N` it runs on
an N-rank engine (pipeline.plan.routing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pipeline.errors import ErrorRecord, Stage, Unit
from pipeline.plan.prompts import encode_prompt
from pipeline.plan.sections import split_sections
from pipeline.plan.work import WorkUnit, section_units


class TextTokenizer(Protocol):
    """The model's tokenizer; one with a `chat_template` (and `encode_chat`) gets chat-style prompts."""

    def encode(self, text: str) -> list[int]: ...


@dataclass
class WorkItem:
    """A unit ready for the engine: exact prompt token ids and its bucket."""

    unit: WorkUnit
    prompt_token_ids: list[int]
    max_tokens: int
    truncated: bool = False
    original_tokens: int = 0
    visible_chars: int | None = None  # characters of the document text left in the prompt (None: all)
    route: str = "engine"  # which engine serves it: "engine", or "context_parallel" (pipeline.plan.routing)

    @property
    def n_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def text_read_fraction(self) -> float:
        """The share of the document's text the model is shown (1.0 unless truncated)."""
        if self.visible_chars is None or not self.unit.text:
            return 1.0
        return self.visible_chars / len(self.unit.text)

    @property
    def visible_text(self) -> str:
        """The part of the document text the model is shown (all of it unless truncated)."""
        return self.unit.text if self.visible_chars is None else self.unit.text[:self.visible_chars]


@dataclass
class Bucket:
    bucket_id: str
    kind: str
    items: list[WorkItem]

    @property
    def prompt_tokens(self) -> int:
        return sum(i.n_tokens for i in self.items)


@dataclass
class FilingPlan:
    """A filing read whole: its unit (no request of its own) and its sections' requests (row id, characters),
    which the reduce step (pipeline.output.filings) turns into the filing's documents row."""

    unit: WorkUnit
    sections: list[tuple[str, int]]


@dataclass
class PreparedRequests:
    buckets: list[Bucket] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    filings: list[FilingPlan] = field(default_factory=list)

    @property
    def n_items(self) -> int:
        return sum(len(b.items) for b in self.buckets)


def _fit(unit: WorkUnit, tokenizer: TextTokenizer, budget: int) -> tuple[list[int], bool, int, int | None]:
    """(prompt ids, truncated?, untruncated token count, characters of the text kept when truncated)."""
    ids = unit.prompt_ids(tokenizer)
    full = len(ids)
    if full <= budget:
        return ids, False, full, None
    if unit.kind == "window":
        raise ValueError(f"window prompt has {full} tokens; the budget is {budget}")
    if len(unit.prompt_ids(tokenizer, "")) > budget:
        raise ValueError(f"the instruction alone exceeds the budget of {budget} tokens")
    # Even the lines of its choices do not fit: the model reads the text's longest prefix that does, as it is
    # (focusing each prefix would scan every candidate again at each step of the search)
    text = unit.text
    lo, hi = 0, len(text)  # binary search on characters: largest prefix that fits
    ratio = budget / len(unit.prompt_ids(tokenizer, focus=False))
    guess = int(len(text) * ratio)
    for _ in range(40):
        if hi - lo <= 1:
            break
        mid = min(max(guess, lo + 1), hi - 1) if guess else (lo + hi) // 2
        guess = 0
        if len(unit.prompt_ids(tokenizer, text[:mid], focus=False)) <= budget:
            lo = mid
        else:
            hi = mid
    ids = unit.prompt_ids(tokenizer, text[:lo], focus=False)
    return ids, True, full, lo


SECTION_TITLE_TOKENS = 64  # room in a section's prompt for the heading it is shown under


def _section_budget(tokenizer: TextTokenizer, max_model_len: int, answer_tokens: int, section_tokens: int) -> int:
    """Tokens of document text one section request holds: `section_tokens`, or less where the context is shorter
    (the instruction, the heading and the answer take the rest)."""
    overhead = len(encode_prompt(tokenizer, "section", text="")) + SECTION_TITLE_TOKENS
    budget = min(section_tokens, max_model_len - answer_tokens - overhead)
    if budget < 1:
        raise ValueError(f"the model's context ({max_model_len} tokens) leaves no room for a section after the "
                         f"instruction and a {answer_tokens}-token answer")
    return budget


def prepare_requests(
    units: list[WorkUnit],
    tokenizer: TextTokenizer,
    max_model_len: int,
    max_tokens: dict[str, int],
    bucket_size: int = 32,
    bucket_tokens: int = 32768,
    section_tokens: int = 2048,
) -> PreparedRequests:
    """Tokenise every unit (exact counts from the model's tokenizer) and bucket by length. A filing becomes its
    sections' requests, each section at most `section_tokens` of text and within the model's context."""
    out = PreparedRequests()
    items: dict[str, list[WorkItem]] = {}
    requests: list[WorkUnit] = []
    for unit in units:
        if unit.kind != "filing":
            requests.append(unit)
            continue
        try:
            sections = section_units(unit, split_sections(unit.text, _section_budget(
                tokenizer, max_model_len, max_tokens["section"], section_tokens), lambda t: len(tokenizer.encode(t))))
        except ValueError as exc:
            out.errors.append(ErrorRecord(row_id=unit.row_id, unit=Unit.DOCUMENT, source_file=unit.source_file,
                                          stage=Stage.PREPARE, error_class="PromptTooLong", message=str(exc)))
            continue
        out.filings.append(FilingPlan(unit, [(u.row_id, len(u.text)) for u in sections]))
        requests.extend(sections)
    for unit in requests:
        mt = max_tokens[unit.kind]
        try:
            ids, truncated, full, chars = _fit(unit, tokenizer, max_model_len - mt)
        except Exception as exc:
            out.errors.append(ErrorRecord(row_id=unit.row_id, unit=Unit.of_request(unit.kind),
                                          source_file=unit.source_file, stage=Stage.PREPARE, error_class="PromptTooLong"
                                          if isinstance(exc, ValueError) else "InternalError",
                                          message=str(exc), n_rows=unit.n_rows))
            continue
        items.setdefault(unit.kind, []).append(WorkItem(unit, ids, mt, truncated, full, chars))
    for kind in sorted(items):
        ordered = sorted(items[kind], key=lambda w: (w.n_tokens, w.unit.row_id))
        current: list[WorkItem] = []
        tokens = 0
        for item in ordered:
            if current and (len(current) >= bucket_size or tokens + item.n_tokens > bucket_tokens):
                out.buckets.append(Bucket(f"{kind}-{len([b for b in out.buckets if b.kind == kind]):05d}", kind, current))
                current, tokens = [], 0
            current.append(item)
            tokens += item.n_tokens
        if current:
            out.buckets.append(Bucket(f"{kind}-{len([b for b in out.buckets if b.kind == kind]):05d}", kind, current))
    return out
