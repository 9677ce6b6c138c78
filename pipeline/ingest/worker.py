"""Parse input files in a separate process, so a parser that crashes, hangs inside C code or exhausts memory
costs only its file: the parent kills the worker, records the file's error row and starts a fresh worker.

    with FileWorker(limits) as worker:
        outcome = worker.parse(FileTask(...))   # ParsedPdf | ParsedLog | FileFailure

The worker reads the file itself, so the parent never holds a large file's bytes. Workers are forked from a
forkserver (a clean process with no threads), which is safe even when the parent has loaded torch.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.errors import ErrorRecord
from pipeline.ingest.limits import IngestLimits

_POLL_S = 0.05


@dataclass(frozen=True)
class FileTask:
    kind: str  # "pdf" | "transactions"
    path: str
    source_file: str
    sha: str
    default_currency: str | None = None


@dataclass
class ParsedPdf:
    result: Any  # PdfDocument | ErrorRecord


@dataclass
class ParsedLog:
    rows: pa.Table
    errors: list[ErrorRecord] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class FileFailure:
    """The file as a whole failed in a way its parser could not report (killed, crashed, raised)."""

    error_class: str
    message: str


def parse_file(task: FileTask, limits: IngestLimits) -> ParsedPdf | ParsedLog | FileFailure:
    """Read and parse one file (in whichever process calls it)."""
    data = Path(task.path).read_bytes()
    if task.kind == "pdf":
        from pipeline.ingest.pdf import read_pdf

        return ParsedPdf(read_pdf(data, task.source_file, max_pages=limits.max_pages,
                                  max_text_chars=limits.max_text_chars))
    from pipeline.ingest.transactions import read_transactions, rows_to_table

    tf = read_transactions(data, task.source_file, task.sha, task.default_currency)
    return ParsedLog(rows_to_table(tf.rows), tf.errors, tf.details)


def _parse_safely(task: FileTask, limits: IngestLimits, parser: Callable[..., Any] = parse_file
                  ) -> ParsedPdf | ParsedLog | FileFailure:
    try:
        return parser(task, limits)
    except MemoryError:
        return FileFailure("MemoryLimit", "the parser ran out of memory")
    except OSError as exc:  # vanished or became unreadable after discovery
        return FileFailure("UnreadableFile", f"cannot read the file ({type(exc).__name__}: {exc.strerror or exc})")
    except Exception as exc:  # a parser bug: this file's error, and the worker keeps serving
        return FileFailure("InternalError", f"{type(exc).__name__}: {exc}")


def _serve(conn: Any, limits: IngestLimits, parser: Callable[..., Any]) -> None:
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        conn.send(_parse_safely(task, limits, parser))


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _context() -> Any:
    methods = mp.get_all_start_methods()
    if "forkserver" in methods:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["pipeline.ingest.worker", "pipeline.ingest.pdf", "pipeline.ingest.transactions"])
        return ctx
    return mp.get_context("spawn")


class FileWorker:
    """One parser process at a time, restarted after a kill; `parse` enforces the time and memory limits."""

    def __init__(self, limits: IngestLimits, parser: Callable[..., Any] = parse_file) -> None:
        """`parser`: a module-level function (task, limits) -> outcome; tests pass misbehaving ones."""
        self.limits = limits
        self.parser = parser
        self._ctx = _context() if limits.isolate else None
        self._proc: Any = None
        self._conn: Any = None

    def __enter__(self) -> FileWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_serve, args=(child, self.limits, self.parser), daemon=True, name="ingest-worker")
        self._proc.start()
        child.close()
        self._conn = parent

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join()
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(timeout=5)
            except OSError:
                pass
        self._kill()

    def parse(self, task: FileTask, size_bytes: int) -> ParsedPdf | ParsedLog | FileFailure:
        if self._ctx is None:
            return _parse_safely(task, self.limits, self.parser)
        if self._proc is None or not self._proc.is_alive():
            self._start()
        budget = self.limits.seconds_for(size_bytes)
        deadline = time.monotonic() + budget
        self._conn.send(task)
        while True:
            try:
                if self._conn.poll(_POLL_S):
                    return self._conn.recv()
            except (EOFError, OSError):
                pass
            if not self._proc.is_alive():
                code = self._proc.exitcode
                self._kill()
                how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                return FileFailure("ParserCrashed", f"the parser process died ({how}) while reading this file")
            rss = _rss_bytes(self._proc.pid)
            if rss > self.limits.max_worker_memory_bytes:
                self._kill()
                return FileFailure("MemoryLimit", f"the parser used {rss >> 20} MiB, over the limit of "
                                   f"{self.limits.max_worker_memory_bytes >> 20} MiB (max_worker_memory_bytes)")
            if time.monotonic() > deadline:
                self._kill()
                return FileFailure("FileTimeout", f"parsing took longer than {budget:.0f} s (parse_seconds "
                                   f"{self.limits.parse_seconds:g} + {self.limits.parse_seconds_per_mib:g} per MiB)")
