"""Bounds on what one input file may cost, enforced by `pipeline.ingest.worker` (a crash, hang or memory blow-up
in a parser becomes that file's error row; the run goes on)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline.machine import usable_cores

MIB = 1 << 20


# What the parser process peaks at when it reads a transaction log of each format whole, per byte of the file,
# measured with scripts/parser_peak.py on made-up logs of typical records (docs/bench/parser-memory.md) and
# rounded up. A whole-read log whose estimate exceeds the worker's memory limit is refused before it is parsed
# (FileTooLarge, naming both limits): the size limit follows from the memory limit instead of contradicting it.
# Delimited and JSON Lines logs over `stream_log_bytes` are read in batches and have no such bound. Files of unusually short
# records can still exceed the estimate; the worker's own memory check (MemoryLimit) stays the backstop.
WHOLE_READ_PEAK_PER_BYTE: dict[str, float] = {
    "delimited": 30.0, "json": 16.0, "jsonl": 18.0, "parquet": 110.0, "ofx": 85.0, "camt": 22.0,
    "mt940": 42.0, "qif": 55.0, "excel": 50.0, "html_table": 35.0, "spreadsheet_xml": 22.0,
}
WORKER_BASE_BYTES = 128 * MIB  # the parser process with its readers loaded, before its first file
# Formats whose whole read is slower than `parse_seconds_per_mib` allows (same measurement, twice the time
# measured on a busy 2-core machine): their time limit grows at this rate instead.
WHOLE_READ_SECONDS_PER_MIB: dict[str, float] = {"ofx": 10.0}


def whole_read_peak(fmt: str, size_bytes: int) -> int:
    """The estimated peak resident memory of the parser process reading a `fmt` log of `size_bytes` whole."""
    return WORKER_BASE_BYTES + int(WHOLE_READ_PEAK_PER_BYTE[fmt] * size_bytes)


class IngestLimits(BaseModel):
    """Per-file limits. The defaults admit every realistic statement, invoice or daily log; raise them for
    unusual inputs (`pipeline run --max-file-mb ...`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_file_bytes: int = Field(default=512 * MIB, ge=1, description="larger files are not read (FileTooLarge)")
    stream_log_bytes: int = Field(default=16 * MIB, ge=1, description="delimited and JSON Lines logs larger than "
                                  "this are read in batches into a spool file (pipeline.ingest.stream_log)")
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
    ocr_runtime: Literal["auto", "openvino", "onnxruntime"] = Field(
        default="auto", description="what runs RapidOCR's models: OpenVINO where installed (the faster here: "
                                    "docs/eval/ocr-settings.md), else onnxruntime; both give the same text")
    # One by default: on the 2-core machines two one-thread processes read the shared receipts no faster than one
    # two-thread process (onnxruntime: 1.02-1.14x; OpenVINO unpinned: the same time; docs/bench/real/README.md); on
    # many cores, where one process's threads scale worse, more may pay (each holds its own OCR models, ~150 MB).
    ocr_workers: int = Field(default=1, ge=1, description="scans OCRed at once, each in its own worker process on "
                             "its share of the cores")
    isolate: bool = Field(default=True, description="parse in a worker process (False: in-process, no time or "
                                                    "memory bound; for debugging)")

    def ocr_threads(self) -> int:
        """Threads of one OCR process: the cores shared among the processes reading at once."""
        return max(1, usable_cores() // self.ocr_workers)

    def seconds_for(self, size_bytes: int, fmt: str | None = None) -> float:
        """The time allowed to parse a file (`fmt`: the format a transaction log is read whole as)."""
        per_mib = max(self.parse_seconds_per_mib, WHOLE_READ_SECONDS_PER_MIB.get(fmt or "", 0.0))
        return self.parse_seconds + per_mib * size_bytes / MIB
