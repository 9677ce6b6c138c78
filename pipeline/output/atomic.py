"""Files written whole or not at all: a temporary name beside the target, fsync, then one rename, so a reader (or
a run after a kill) sees the old file, the new one, or none, never a part."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def temporary_name(path: Path) -> Path:
    """Where `path` is written before its rename (hidden, and per process, so two writers never share one)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    """`write(temporary path)`, then fsync and rename it to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    write(tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
