"""Deterministic ids (the same inputs always give the same id, across processes and machines) and the run's
identity every row id carries."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


def stable_id(*parts: object, length: int = 32) -> str:
    """Hex digest over the parts (joined with a separator that cannot occur in their reprs)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()[:length]


def sha256_bytes(data: bytes) -> str:
    """Full hex SHA-256 of a byte string (content identity of an input file)."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | Path) -> str:
    """Streamed SHA-256 of a file's bytes (never holds a large file in memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class RunIdentity:
    """What every row id of a run carries besides the row's own content, computed once per run
    (`pipeline.plan.work.run_identity`) and passed along: the model (with adapter, quantization and KV format),
    the prompt version (with the chat template's hash), the schema version and, per request kind, the output
    settings that can change an answer (`pipeline.plan.work.output_settings`)."""

    model_id: str
    prompt_version: str
    schema_version: str
    settings: Mapping[str, str] = field(default_factory=dict)  # "document" / "window" -> output settings id

    def row_fields(self) -> dict[str, str]:
        """The identity columns of every output and error row."""
        return {"model_id": self.model_id, "prompt_version": self.prompt_version,
                "schema_version": self.schema_version}
