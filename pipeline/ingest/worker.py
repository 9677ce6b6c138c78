"""Parse input files in a separate process, so a parser that crashes, hangs inside C code or exhausts memory
costs only its file: the parent kills the worker, records the file's error row and starts a fresh worker.

    with FileWorker(limits) as worker:
        outcome = worker.parse(FileTask(...))   # ParsedPdf | ParsedLog | FileFailure

The worker reads the file itself, so the parent never holds a large file's bytes. It is a fresh interpreter
(`python -m pipeline.ingest.worker_main`, talking over two pipes), not a multiprocessing child: fork is unsafe once
the parent runs threads (torch, Arrow), and spawn/forkserver re-import the caller's `__main__`, which breaks
scripts without a main guard.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.errors import ErrorRecord
from pipeline.identity import file_sha256, sha256_bytes
from pipeline.ingest.limits import IngestLimits

_POLL_S = 0.05
_READY = "ready"
_START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class FileTask:
    kind: str  # "pdf" | "einvoice" | "markup" | "ocr" | "transactions"
    path: str
    source_file: str
    sha: str
    default_currency: str | None = None
    profiles: tuple[Any, ...] = ()  # BankProfile: the layouts a delimited log may match
    pages: tuple[int, ...] = ()  # kind "ocr": the 1-based pages to read
    spool_dir: str | None = None  # kind "transactions": read in batches, the rows written to a spool file here


@dataclass
class ParsedPdf:
    result: Any  # PdfDocument | ErrorRecord


@dataclass
class ParsedOcr:
    result: Any  # pipeline.ingest.ocr.OcrResult


@dataclass
class ParsedLog:
    rows: pa.Table
    errors: list[ErrorRecord] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    n_records: int = 0  # records the reader saw (each must end as a row or a row error)
    question: Any = None  # LayoutQuestion: a layout left for the model to read
    spool: str | None = None  # a log read in batches: its rows are in this Parquet file, not in `rows`
    spool_rows: int = 0


@dataclass
class FileFailure:
    """The file as a whole failed in a way its parser could not report (killed, crashed, raised)."""

    error_class: str
    message: str


def changed_since_hashed() -> FileFailure:
    return FileFailure("FileChanged", "the file changed while this run read it (still being written, or replaced); "
                       "left out of this run, a re-run reads it whole")


def parse_file(task: FileTask, limits: IngestLimits) -> ParsedPdf | ParsedOcr | ParsedLog | FileFailure:
    """Read and parse one file (in whichever process calls it): the bytes parsed are the bytes the caller hashed
    (`task.sha`), or the outcome is FileChanged."""
    if task.kind == "transactions" and task.spool_dir is not None:
        parsed = _stream_log(task, Path(task.spool_dir))
        # the stream read the file in pieces: hash it once more after the last one
        return parsed if file_sha256(task.path) == task.sha else changed_since_hashed()
    data = Path(task.path).read_bytes()
    if sha256_bytes(data) != task.sha:
        return changed_since_hashed()
    if task.kind == "pdf":
        # lazy: a worker process loads only the reader its task needs
        from pipeline.ingest.pdf import read_pdf

        return ParsedPdf(read_pdf(data, task.source_file, max_pages=limits.max_pages,
                                  max_text_chars=limits.max_text_chars, allow_no_text=True))
    if task.kind == "einvoice":
        # lazy: a worker process loads only the reader its task needs
        from pipeline.ingest.xml_document import read_xml_document

        return ParsedPdf(read_xml_document(data, task.source_file))
    if task.kind == "markup":
        # lazy: a worker process loads only the reader its task needs
        from pipeline.ingest.markup import read_markup_document

        return ParsedPdf(read_markup_document(data, task.source_file, max_pages=limits.max_pages,
                                              max_text_chars=limits.max_text_chars))
    if task.kind == "ocr":
        # lazy: a worker process loads only the reader its task needs
        from pipeline.ingest.ocr import OcrSettings, ocr_pdf_pages

        settings = OcrSettings(threads=limits.ocr_threads(), runtime=limits.ocr_runtime)
        return ParsedOcr(ocr_pdf_pages(data, list(task.pages), settings))
    # lazy: a worker process loads only the reader its task needs
    from pipeline.ingest.transactions import read_transactions, rows_to_table

    tf = read_transactions(data, task.source_file, task.sha, task.default_currency, task.profiles)
    return ParsedLog(rows_to_table(tf.rows), tf.errors, tf.details, tf.n_records, tf.question)


def _stream_log(task: FileTask, spool_dir: Path) -> ParsedLog:
    """A large delimited or JSON Lines log read in batches: its rows in `spool_dir/<sha>.parquet`, or its file error (with the
    layout question its head raises, for the model)."""
    # lazy: a worker process loads only the reader its task needs
    from pipeline.ingest.profiles import profile_for
    from pipeline.ingest.stream_log import HEAD_BYTES, stream_transactions
    from pipeline.ingest.tabular import NotATable
    from pipeline.ingest.transactions import rows_to_table, unreadable_log

    spool = spool_dir / f"{task.sha}.parquet"
    try:
        tf, n = stream_transactions(task.path, task.source_file, task.sha, spool, task.default_currency,
                                    task.profiles)
    except NotATable as exc:
        with open(task.path, "rb") as f:
            head = f.read(HEAD_BYTES)
        tf = unreadable_log(exc, head, task.source_file, task.sha,
                            ask=profile_for(task.source_file, task.profiles) is None)
        return ParsedLog(rows_to_table([]), tf.errors, tf.details, tf.n_records, tf.question)
    return ParsedLog(rows_to_table([]), tf.errors, tf.details, tf.n_records, None, spool=str(spool), spool_rows=n)


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


# How long past its budget a parse may run before the worker ends itself (the parent normally kills it at the
# budget; this bound holds when the parent stalls, is stopped or died).
OWN_LIMIT_GRACE_S = 5.0


def serve(conn_in: Connection, conn_out: Connection, limits: IngestLimits, parser: Callable[..., Any]) -> None:
    """Answer (task, budget seconds) messages until None or EOF. Each parse runs under an interval timer whose
    SIGALRM has no handler, so the kernel ends the process at budget + grace even inside C code holding the GIL."""
    conn_out.send(_READY)  # imports done: from here on, time counts against the file being parsed
    while True:
        try:
            msg = conn_in.recv()
        except EOFError:
            return
        if msg is None:
            return
        task, budget = msg
        signal.setitimer(signal.ITIMER_REAL, budget + OWN_LIMIT_GRACE_S)
        outcome = _parse_safely(task, limits, parser)
        signal.setitimer(signal.ITIMER_REAL, 0)
        conn_out.send(outcome)


def _parser_name(parser: Callable[..., Any]) -> str:
    return f"{parser.__module__}:{parser.__qualname__}"


def load_parser(name: str) -> Callable[..., Any]:
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def rss_bytes(pid: int) -> int:
    """Resident memory of a process, from /proc (0 where unreadable)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class FileWorker:
    """One parser process at a time, restarted after a kill; `parse` enforces the time and memory limits."""

    def __init__(self, limits: IngestLimits, parser: Callable[..., Any] = parse_file) -> None:
        """`parser`: a module-level function (task, limits) -> outcome; tests pass misbehaving ones."""
        self.limits = limits
        self.parser = parser
        self._proc: subprocess.Popen[bytes] | None = None
        self._send: Connection | None = None
        self._recv: Connection | None = None

    def __enter__(self) -> FileWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        task_r, task_w = os.pipe()
        out_r, out_w = os.pipe()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.ingest.worker_main", str(task_r), str(out_w),
             self.limits.model_dump_json(), _parser_name(self.parser)],
            pass_fds=(task_r, out_w), env=env, stdin=subprocess.DEVNULL)
        os.close(task_r)
        os.close(out_w)
        self._send, self._recv = Connection(task_w, readable=False), Connection(out_r, writable=False)
        try:
            ready = self._recv.poll(_START_TIMEOUT_S) and self._recv.recv() == _READY
        except (EOFError, OSError):
            ready = False
        if not ready:
            self._kill()
            raise RuntimeError(f"the ingest worker did not start ({sys.executable} -m pipeline.ingest.worker_main)")

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait()
        for conn in (self._send, self._recv):
            if conn is not None:
                conn.close()
        self._proc = self._send = self._recv = None

    def close(self) -> None:
        if self._alive():
            try:
                self._send.send(None)  # type: ignore[union-attr]
                self._proc.wait(timeout=5)  # type: ignore[union-attr]
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()

    def parse(self, task: FileTask, size_bytes: int, budget: float | None = None
              ) -> ParsedPdf | ParsedOcr | ParsedLog | FileFailure:
        """The task's outcome within `budget` seconds (default: the limits' time for a file of `size_bytes`)."""
        if not self.limits.isolate:
            return _parse_safely(task, self.limits, self.parser)
        if not self._alive():
            self._kill()
            self._start()
        assert self._proc is not None and self._send is not None and self._recv is not None
        budget = self.limits.seconds_for(size_bytes) if budget is None else budget
        deadline = time.monotonic() + budget
        try:
            self._send.send((task, budget))
        except OSError:  # the worker died before reading the task; the loop below reports how
            pass
        while True:
            try:
                if self._recv.poll(_POLL_S):
                    return self._recv.recv()
            except (EOFError, OSError):  # the worker closed its end: it is exiting
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._kill()
                if code == -signal.SIGALRM:  # the worker's own limit (serve) ended it
                    return FileFailure("FileTimeout", f"parsing took longer than {budget:.0f} s")
                how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                return FileFailure("ParserCrashed", f"the parser process died ({how}) while reading this file")
            rss = rss_bytes(self._proc.pid)
            if rss > self.limits.max_worker_memory_bytes:
                self._kill()
                return FileFailure("MemoryLimit", f"the parser used {rss >> 20} MiB, over the limit of "
                                   f"{self.limits.max_worker_memory_bytes >> 20} MiB (max_worker_memory_bytes)")
            if time.monotonic() > deadline:
                self._kill()
                limit = (f"ocr_seconds_per_page {self.limits.ocr_seconds_per_page:g}" if task.kind == "ocr" else
                         f"parse_seconds {self.limits.parse_seconds:g} + {self.limits.parse_seconds_per_mib:g} per MiB")
                return FileFailure("FileTimeout", f"parsing took longer than {budget:.0f} s ({limit})")

