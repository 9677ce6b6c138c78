"""JSON-schema constrained decoding: the language is exactly compact, field-ordered JSON that pydantic accepts."""

from __future__ import annotations

import datetime
import enum
import json
import re
from pathlib import Path
from typing import Any, Literal, Optional

import pytest
import torch
from pydantic import BaseModel, Field

from engine.structured import StructuredMatcher, StructuredOutputBackend
from tests.helpers.checkpoints import build_tokenizer

VOCAB = 384  # model logits width; the tokenizer has 320 ids, so 320..383 must never be allowed
EOS = 1
BOS = 0


class Kind(str, enum.Enum):
    debit = "debit"
    credit = "credit"


class Line(BaseModel):
    amount: float
    kind: Kind
    memo: Optional[str] = Field(default=None, max_length=6)


class Statement(BaseModel):
    account: str = Field(pattern=r"^[A-Z]{2}[0-9]{2}$")
    currency: Literal["EUR", "USD"]
    lines: list[Line] = Field(max_length=3)
    count: int
    note: Optional[str] = Field(default=None, max_length=6)


class Dated(BaseModel):
    """Formats pydantic emits: llguidance's own date-time/time/duration reject pydantic's naive serialisations."""

    day: datetime.date
    at: datetime.datetime
    naive: datetime.datetime
    clock: datetime.time
    span: datetime.timedelta
    where: Path  # format "path" is unknown to llguidance: dropped and left to pydantic
    tags: dict[str, int] = {}


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tok")
    build_tokenizer(path)
    return path


@pytest.fixture(scope="module")
def hf_tok(tok_dir: Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tok_dir / "tokenizer.json"))


@pytest.fixture(scope="module")
def backend(tok_dir: Path) -> StructuredOutputBackend:
    return StructuredOutputBackend((tok_dir / "tokenizer.json").read_text(), VOCAB, [EOS], num_threads=1)


def allowed_ids(backend: StructuredOutputBackend, matcher: StructuredMatcher) -> set[int]:
    mask = backend.allocate_mask(1)
    matcher.fill_allowed(mask, 0)
    logits = torch.zeros(1, VOCAB)
    backend.apply_mask(logits, mask)
    return set(torch.isfinite(logits[0]).nonzero().flatten().tolist())


def compact(obj: BaseModel, ensure_ascii: bool = True) -> str:
    return json.dumps(obj.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=ensure_ascii)


def feed(backend: StructuredOutputBackend, hf_tok: Any, schema: dict[str, Any], text: str) -> StructuredMatcher:
    """Accept `text` token by token, checking each token is in the mask first."""
    matcher = backend.new_matcher(schema)
    for pos, tid in enumerate(hf_tok.encode(text, add_special_tokens=False).ids):
        in_mask = tid in allowed_ids(backend, matcher)
        try:
            matcher.accept(tid)
        except ValueError:
            assert not in_mask, f"token {pos} of {text!r} is in the mask but accept() refused it"
            raise
        assert in_mask, f"token {pos} {hf_tok.decode([tid])!r} of {text!r} accepted but masked out"
    return matcher


def outside_strings(text: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_sampler_always_yields_valid_instances(backend: StructuredOutputBackend, hf_tok: Any, seed: int) -> None:
    """Greedy picks over random logits, masked in a batch with unconstrained rows interleaved, end in valid JSON."""
    schema = Statement.model_json_schema()
    batch, constrained_rows = 24, list(range(1, 24, 2))  # odd rows constrained, even rows free
    matchers = [backend.new_matcher(schema) for _ in constrained_rows]
    outputs: list[list[int]] = [[] for _ in constrained_rows]
    mask = backend.allocate_mask(len(matchers))
    gen = torch.Generator().manual_seed(seed)
    for _ in range(600):
        live = [k for k, m in enumerate(matchers) if not outputs[k] or outputs[k][-1] != EOS]
        if not live:
            break
        logits = torch.randn(batch, VOCAB, generator=gen)
        logits[:, 320:] += 100.0  # ids the tokenizer lacks must lose even when the model favours them
        before = logits.clone()
        backend.fill_masks([matchers[k] for k in live], mask)
        rows = [constrained_rows[k] for k in live]
        backend.apply_mask(logits, mask, rows=rows)
        free = [r for r in range(batch) if r not in rows]
        assert torch.equal(logits[free], before[free]), "unconstrained rows were modified"
        picks = logits.argmax(-1)
        for k, row in zip(live, rows):
            tid = int(picks[row])
            assert tid < 320 and tid != BOS
            matchers[k].accept(tid)
            outputs[k].append(tid)
    for k, matcher in enumerate(matchers):
        assert outputs[k][-1] == EOS, "generation did not finish within the step budget"
        assert matcher.is_finished() and matcher.error is None
        text = hf_tok.decode(outputs[k][:-1])
        obj = json.loads(text)
        Statement.model_validate(obj)
        assert not re.search(r"\s", outside_strings(text)), f"whitespace outside strings: {text!r}"
        assert list(obj) == [key for key in Statement.model_fields if key in obj], "keys out of field order"


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_compact_rendering_accepted_then_only_eos(
    backend: StructuredOutputBackend, hf_tok: Any, ensure_ascii: bool
) -> None:
    instances: list[BaseModel] = [
        Statement(account="DE89", currency="EUR", lines=[], count=0),
        Statement(
            account="FR12",
            currency="USD",
            lines=[Line(amount=-1234.5, kind=Kind.debit, memo='a"€\n'), Line(amount=1e-05, kind=Kind.credit)],
            count=-17,
            note="café",
        ),
        Dated(
            day=datetime.date(2024, 2, 29),
            at=datetime.datetime(2024, 3, 15, 10, 30, 0, 120000, tzinfo=datetime.timezone.utc),
            naive=datetime.datetime(2023, 11, 2, 8, 0),
            clock=datetime.time(23, 59, 1),
            span=datetime.timedelta(hours=1, seconds=1.5),
            where=Path("in/statement 1.pdf"),
            tags={"x": 1, "yy": -2},
        ),
    ]
    for inst in instances:
        matcher = feed(backend, hf_tok, type(inst).model_json_schema(), compact(inst, ensure_ascii))
        assert matcher.is_finished()
        assert allowed_ids(backend, matcher) == {EOS}
        matcher.accept(EOS)
        assert matcher.is_finished() and matcher.error is None


def test_whitespace_and_key_order_are_rejected(backend: StructuredOutputBackend, hf_tok: Any) -> None:
    inst = Statement(account="DE89", currency="EUR", lines=[Line(amount=2.0, kind=Kind.debit)], count=3)
    schema = Statement.model_json_schema()
    dumped = inst.model_dump(mode="json")
    reordered = {"currency": dumped["currency"], **{k: v for k, v in dumped.items() if k != "currency"}}
    for bad in (
        json.dumps(dumped),  # default ", " and ": " separators
        json.dumps(dumped, indent=1),
        " " + compact(inst),
        json.dumps(reordered, separators=(",", ":")),
        json.dumps({**dumped, "extra": 1}, separators=(",", ":")),  # objects are closed
    ):
        with pytest.raises(ValueError, match="not allowed"):
            feed(backend, hf_tok, schema, bad)


def test_invalid_token_raises_and_leaves_state_usable(backend: StructuredOutputBackend, hf_tok: Any) -> None:
    matcher = backend.new_matcher(Statement.model_json_schema())
    for bad in (hf_tok.token_to_id("a"), EOS, BOS, 350):
        assert bad not in allowed_ids(backend, matcher)
        with pytest.raises(ValueError, match=f"token {bad} is not allowed"):
            matcher.accept(bad)
    assert matcher.error is None and not matcher.is_finished()
    matcher.accept(hf_tok.token_to_id("{"))  # still at the start, so the object can open
    after_brace = allowed_ids(backend, matcher)
    assert after_brace and all(hf_tok.decode([t]).startswith('"') for t in after_brace)


def test_matchers_from_cached_schema_are_independent(backend: StructuredOutputBackend, hf_tok: Any) -> None:
    schema = Statement.model_json_schema()
    first, second = backend.new_matcher(schema), backend.new_matcher(schema)
    first.accept(hf_tok.token_to_id("{"))
    assert allowed_ids(backend, second) == {hf_tok.token_to_id("{")}
    assert hf_tok.token_to_id("{") not in allowed_ids(backend, first)


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "strin"}, "Invalid type"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}, "does not exist"),
        ({"type": "string", "minLength": 5, "maxLength": 2}, "minLength"),
        ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
          "additionalProperties": False, "minProperties": 3}, "nsatisfiable|minProperties"),
    ],
)
def test_bad_schema_gives_clear_value_error(
    backend: StructuredOutputBackend, schema: dict[str, Any], reason: str
) -> None:
    with pytest.raises(ValueError, match="JSON schema") as err:
        backend.validate_schema(schema)
    assert re.search(reason, str(err.value)), str(err.value)
    with pytest.raises(ValueError):
        backend.new_matcher(schema)


def test_unenforceable_pattern_is_left_to_validation(backend: StructuredOutputBackend, hf_tok: Any) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?=x)x+$"}}, "required": ["a"]}
    backend.validate_schema(schema)
    assert feed(backend, hf_tok, schema, '{"a":"yy"}').is_finished()


def test_apply_mask_bans_columns_beyond_vocab(backend: StructuredOutputBackend) -> None:
    matcher = backend.new_matcher({"type": "object", "properties": {"a": {"type": "integer"}}})
    mask = backend.allocate_mask(2)
    backend.fill_masks([matcher], mask)
    logits = torch.zeros(3, VOCAB + 5)
    backend.apply_mask(logits, mask[:1], rows=torch.tensor([2]))
    expected = [t for t in range(VOCAB) if (int(mask[0, t // 32]) >> (t % 32)) & 1]
    assert expected and all(t < 320 for t in expected)
    assert torch.isfinite(logits[2]).nonzero().flatten().tolist() == expected
    assert torch.isfinite(logits[:2]).all()


def test_backend_rejects_bad_construction(tok_dir: Path) -> None:
    with pytest.raises(ValueError, match="EOS"):
        StructuredOutputBackend((tok_dir / "tokenizer.json").read_text(), VOCAB, [])
    with pytest.raises(ValueError, match="vocab size too small"):
        StructuredOutputBackend((tok_dir / "tokenizer.json").read_text(), 100, [EOS])


def test_device_unpack_matches_cpu_unpack(backend: StructuredOutputBackend) -> None:
    """The accelerator path unpacks with torch shifts; it must agree bit for bit with the CPU (numpy) path."""
    from engine.structured import _unpack_np

    gen = torch.Generator().manual_seed(3)
    mask = torch.randint(-(2**31), 2**31 - 1, (5, backend.mask_words), dtype=torch.int32, generator=gen)
    assert torch.equal(backend._unpack_shift(mask), _unpack_np(mask))  # noqa: SLF001


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device to exercise the on-device mask path")
def test_apply_mask_on_cuda_matches_cpu(backend: StructuredOutputBackend) -> None:
    gen = torch.Generator().manual_seed(4)
    mask = torch.randint(-(2**31), 2**31 - 1, (4, backend.mask_words), dtype=torch.int32, generator=gen)
    logits = torch.randn(6, VOCAB + 3)
    on_gpu = logits.cuda()
    backend.apply_mask(logits, mask, rows=[5, 0, 2, 3])
    backend.apply_mask(on_gpu, mask, rows=[5, 0, 2, 3])
    assert torch.equal(on_gpu.cpu(), logits)


def test_grounded_window_schema_admits_supported_flags_only(backend: StructuredOutputBackend, hf_tok: Any) -> None:
    """The engine's grammar for a window whose only non-zero count is structuring: [] and ["structuring"] decode,
    a flag without evidence does not, and a window without any non-zero count takes only "low" and []."""
    from pipeline.infer.validate import decoding_schema

    counts = {"large_cash_count": 0, "new_counterparty_count": 0, "structuring_count": 3, "foreign_count": 0}
    schema = decoding_schema("window", facts=counts)
    head = '{"classification":"net_inflow","risk_level":"medium","flags":'
    for flags in ("[]", '["structuring"]'):
        assert feed(backend, hf_tok, schema, head + flags + ',"narrative":"ok"}').is_finished()
    with pytest.raises(ValueError):
        feed(backend, hf_tok, schema, head + '["large_cash"')
    quiet = decoding_schema("window", facts={**counts, "structuring_count": 0})
    assert feed(backend, hf_tok, quiet, '{"classification":"net_inflow","risk_level":"low","flags":[],'
                                       '"narrative":"ok"}').is_finished()
    with pytest.raises(ValueError):
        feed(backend, hf_tok, quiet, '{"classification":"net_inflow","risk_level":"medium"')
