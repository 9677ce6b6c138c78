"""Completion -> validated pydantic model, or an error row. Never a silent drop.

Constrained decoding makes the JSON syntactically valid by construction when generation finishes;
pydantic then checks what a JSON schema cannot (canonical flag order, no repeats). A completion
that stopped at max_tokens, failed in the engine, or fails validation becomes an ErrorRecord.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from pipeline.errors import ErrorRecord, Stage, Unit
from pipeline.grounding import field_choices, grounded_schema
from pipeline.grounding.sections import grounded_section_schema
from pipeline.grounding.windows import grounded_window_schema
from schemas import (
    AccountWindowSummary,
    DocumentExtraction,
    SectionSummary,
    constrained_json_schema,
)

OUTPUT_MODELS: dict[str, type[BaseModel]] = {"document": DocumentExtraction, "window": AccountWindowSummary,
                                              "section": SectionSummary}


def output_model(kind: str) -> type[BaseModel]:
    return OUTPUT_MODELS[kind]


@functools.cache
def _plain_schema(kind: str) -> dict[str, Any]:

    return constrained_json_schema(output_model(kind))


def decoding_schema(kind: str, document_text: str | None = None,
                    facts: Mapping[str, object] | None = None) -> dict[str, Any]:
    """JSON schema handed to the engine (SamplingParams.json_schema) for this kind of request (a fresh copy).

    With `document_text`, a document's fields are narrowed to the values that text prints (a section's summary
    to its sentences); with `facts`, a window's flags and risk level to what its counts support
    (`pipeline.grounding`)."""
    schema = _plain_schema(kind)
    if kind == "document" and document_text is not None:

        return grounded_schema(schema, field_choices(document_text))
    if kind == "section" and document_text is not None:
        return grounded_section_schema(schema, document_text)
    if kind == "window" and facts is not None:

        return grounded_window_schema(schema, facts)
    return copy.deepcopy(schema)


def _short(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or "(root)"
        parts.append(f"{loc}: {err.get('msg')}")
    more = f" (+{exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(parts) + more


def validate_completion(
    *, kind: str, row_id: str, source_file: str, n_rows: int, text: str, finish_reason: str | None,
    error: str | None, max_tokens: int,
) -> BaseModel | ErrorRecord:
    """Parse and validate one completion; the error row (if any) says which stage and why."""
    unit = Unit.of_request(kind)

    def fail(stage: str, cls: str, msg: str) -> ErrorRecord:
        return ErrorRecord(row_id=row_id, unit=unit, source_file=source_file, stage=stage, error_class=cls,
                           message=msg[:2000], n_rows=n_rows)

    if error or finish_reason == "error":
        return fail(Stage.INFER, "EngineError", error or "engine reported an error")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if finish_reason == "length":
            return fail(Stage.VALIDATE, "OutputTruncated",
                        f"generation hit max_tokens={max_tokens} before the JSON object closed")
        return fail(Stage.VALIDATE, "InvalidJSON", f"{exc.msg} at char {exc.pos}: {text[:200]!r}")
    try:
        return output_model(kind).model_validate(data)
    except ValidationError as exc:
        return fail(Stage.VALIDATE, "SchemaValidation", _short(exc))
