"""JSON schemas for constrained decoding and the compact JSON the model is trained to emit.

The constrained schema is pydantic's schema reduced to keywords llguidance handles well
(type, enum, pattern, min/maxLength, items, maxItems, anyOf), with every property required,
properties in model field order and no whitespace, so constrained output is byte-identical
to the training targets produced by `to_compact_json`.
"""

import json
from typing import Any

from pydantic import BaseModel

_KEPT_KEYWORDS = ("type", "enum", "pattern", "minLength", "maxLength", "maxItems", "minItems")


def _simplify(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Inline $refs and keep only the keywords the decoder needs."""
    if "$ref" in node:
        return _simplify(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    out: dict[str, Any] = {k: node[k] for k in _KEPT_KEYWORDS if k in node}
    if "anyOf" in node:
        out["anyOf"] = [_simplify(alt, defs) for alt in node["anyOf"]]
    if "items" in node:
        out["items"] = _simplify(node["items"], defs)
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    return out


def constrained_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Return the decoding schema of `model`: all fields required, in order, compact output."""
    raw = model.model_json_schema()
    defs = raw.get("$defs", {})
    props = {name: _simplify(spec, defs) for name, spec in raw["properties"].items()}
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
        "x-guidance": {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"},
    }


def to_compact_json(obj: BaseModel) -> str:
    """Serialise exactly as the model is trained to answer: field order, no whitespace."""
    return json.dumps(obj.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False)
