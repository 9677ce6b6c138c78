"""Bounds on what one input file may cost, enforced by `pipeline.ingest.worker` (a crash, hang or memory blow-up
in a parser becomes that file's error row; the run goes on)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MIB = 1 << 20


class IngestLimits(BaseModel):
    """Per-file limits. The defaults admit every realistic statement, invoice or daily log; raise them for
    unusual inputs (`pipeline run --max-file-mb ...`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_file_bytes: int = Field(default=512 * MIB, ge=1, description="larger files are not read (FileTooLarge)")
    stream_log_bytes: int = Field(default=16 * MIB, ge=1, description="delimited logs larger than this are read "
                                  "in batches into a spool file (pipeline.ingest.stream_log)")
    max_log_bytes: int = Field(default=64 * 1024 * MIB, ge=1, description="the size limit of a log read in batches "
                               "(instead of max_file_bytes: its memory does not grow with it)")
    max_pages: int = Field(default=5000, ge=1, description="PDFs with more pages are not extracted (TooManyPages)")
    max_text_chars: int = Field(default=20_000_000, ge=1,
                                description="a PDF whose text layer is longer fails with TextTooLong")
    parse_seconds: float = Field(default=120.0, gt=0, description="time allowed per file, plus parse_seconds_per_mib")
    parse_seconds_per_mib: float = Field(default=3.0, ge=0, description="extra time per MiB of file")
    max_worker_memory_bytes: int = Field(default=8192 * MIB, ge=64 * MIB,
                                         description="the parser process's resident memory limit (MemoryLimit)")
    ocr: bool = Field(default=True, description="OCR pages without a text layer (pipeline.ingest.ocr)")
    max_ocr_pages: int = Field(default=50, ge=1, description="pages OCRed per PDF; the rest stay unread")
    ocr_seconds_per_page: float = Field(default=90.0, gt=0, description="time allowed per OCRed page")
    isolate: bool = Field(default=True, description="parse in a worker process (False: in-process, no time or "
                                                    "memory bound; for debugging)")

    def seconds_for(self, size_bytes: int) -> float:
        return self.parse_seconds + self.parse_seconds_per_mib * size_bytes / MIB
