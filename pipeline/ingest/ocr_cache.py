"""OCR's page texts kept per file content, pages and OCR settings, so a scan is read once.

A nightly run over a folder where last week's receipts stay, a backfill, a `--force` re-run or an evaluation
repeated over a scanned set would otherwise OCR every page again (seconds per page, most of a run's time on
scans). The key is the file's SHA-256, the pages asked for, the OCR settings' label (engine, its version, its
settings) and the text version (`pdf_text.TEXT_VERSION`, bumped when the text a page yields changes), so a
different engine, setting or reading order never reuses another's text. Only what OCR read is kept: a failure
(a timeout, a crash) is tried again next time. An unreadable entry is a miss, and a cache that cannot be written
costs only the saving.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from pipeline.identity import stable_id
from pipeline.ingest.ocr import OcrResult
from pipeline.ingest.pdf_text import TEXT_VERSION
from pipeline.output.atomic import temporary_name, write_text_atomic

# The folder `pipeline run` keeps the cache in, inside its output directory ('_'-prefixed: no dataset).
RUN_CACHE_DIR = ("_cache", "ocr")


@dataclass(frozen=True)
class OcrCache:
    """One JSON file per (file, pages, settings) under `root`."""

    root: Path

    def _path(self, sha256: str, pages: tuple[int, ...], label: str) -> Path:
        return self.root / f"{stable_id(sha256, pages, label, TEXT_VERSION)}.json"

    def get(self, sha256: str, pages: tuple[int, ...], label: str) -> OcrResult | None:
        try:
            got = json.loads(self._path(sha256, pages, label).read_text(encoding="utf-8"))
            return OcrResult(engine=str(got["engine"]), texts={int(k): str(v) for k, v in got["texts"].items()},
                             notes=[str(n) for n in got.get("notes", [])])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def remove_partial(self) -> None:
        """Remove entries a killed writer left half-written (call only where no other writer can be at work: a
        run holds its output's lock)."""
        for tmp in self.root.glob(".*.tmp-*") if self.root.is_dir() else []:
            with contextlib.suppress(OSError):
                tmp.unlink()

    def size(self) -> tuple[int, int]:
        """(entries, bytes) kept."""
        sizes = [p.stat().st_size for p in self.root.glob("*.json")] if self.root.is_dir() else []
        return len(sizes), sum(sizes)

    def put(self, sha256: str, pages: tuple[int, ...], label: str, result: OcrResult) -> None:
        path = self._path(sha256, pages, label)
        try:  # whole or absent, even if the run is killed mid-write
            write_text_atomic(path, json.dumps({"engine": result.engine, "texts": result.texts,
                                                "notes": result.notes}, ensure_ascii=False))
        except OSError:
            with contextlib.suppress(OSError):
                temporary_name(path).unlink(missing_ok=True)
