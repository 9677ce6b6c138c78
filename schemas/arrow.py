"""Derive Arrow schemas from the pydantic output models, so the sink has one source of truth.

A field the model writes as text but a data team queries as a date or a number carries `Stored(type)` in its
`Annotated` metadata: the JSON schema the model is constrained to keeps the text (a pattern), the Parquet column
is typed, and `arrow_values` converts one into the other.
"""

import datetime as dt
import types
import typing
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any, Union

import pyarrow as pa
from pydantic import BaseModel


@dataclass(frozen=True)
class Stored:
    """`Annotated` metadata of a text field stored as `type` (date32, or decimal128 read from a plain decimal)."""

    type: pa.DataType


def _stored(annotation: Any) -> pa.DataType | None:
    """The `Stored` type of an annotation (inside Optional/Annotated), or None."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        found = [m.type for m in typing.get_args(annotation)[1:] if isinstance(m, Stored)]
        return found[0] if found else _stored(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return next((t for a in typing.get_args(annotation) if (t := _stored(a)) is not None), None)
    return None


def _field_stored(info: Any) -> pa.DataType | None:
    return next((m.type for m in info.metadata if isinstance(m, Stored)), None) or _stored(info.annotation)


def _arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """Map a field annotation to (Arrow type, nullable)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        stored = _stored(annotation)
        return (stored, False) if stored is not None else _arrow_type(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {annotation!r}")
        inner, _ = _arrow_type(args[0])
        return inner, True
    if origin in (list, tuple, set, frozenset):
        (item,) = typing.get_args(annotation)[:1]
        inner, _ = _arrow_type(item)
        return pa.list_(inner), False
    if isinstance(annotation, type):
        if issubclass(annotation, Enum) or issubclass(annotation, str):
            return pa.string(), False
        if issubclass(annotation, bool):
            return pa.bool_(), False
        if issubclass(annotation, int):
            return pa.int64(), False
        if issubclass(annotation, float):
            return pa.float64(), False
    raise TypeError(f"no Arrow mapping for {annotation!r}")


def arrow_schema_for(model: type[BaseModel]) -> pa.Schema:
    """Arrow schema with one field per model field, in model order; Optional -> nullable."""
    fields = []
    for name, info in model.model_fields.items():
        dtype, nullable = _arrow_type(info.annotation)
        fields.append(pa.field(name, _field_stored(info) or dtype, nullable=nullable))
    return pa.schema(fields)


def arrow_values(model: type[BaseModel], values: dict[str, Any]) -> dict[str, Any]:
    """`values` (the model's JSON-mode dump) with each `Stored` field as its stored Python value: an ISO date as a
    date, a plain decimal as a Decimal (exact, never through a float)."""
    out = dict(values)
    for name, info in model.model_fields.items():
        stored = _field_stored(info)
        value = out.get(name)
        if stored is None or value is None or not isinstance(value, str):
            continue
        out[name] = dt.date.fromisoformat(value) if pa.types.is_date(stored) else Decimal(value)
    return out
