"""Deterministic ids: the same inputs always give the same id, across processes and machines."""

from __future__ import annotations

import hashlib
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
