"""Derive Arrow schemas from the pydantic output models, so the sink has one source of truth."""

import types
import typing
from enum import Enum
from typing import Any, Union

import pyarrow as pa
from pydantic import BaseModel


def _arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """Map a field annotation to (Arrow type, nullable)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _arrow_type(typing.get_args(annotation)[0])
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
        fields.append(pa.field(name, dtype, nullable=nullable))
    return pa.schema(fields)
