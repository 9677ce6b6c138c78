"""Walk the input directory, read each file once, dispatch by kind, and collect Arrow tables."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import queue
import shutil
import tempfile
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from pipeline.errors import ErrorRecord, Stage, Unit, errors_to_table
from pipeline.identity import file_sha256, sha256_bytes
from pipeline.ingest.einvoice import is_einvoice_xml
from pipeline.ingest.facts import facts_to_table
from pipeline.ingest.layout_question import LayoutQuestion
from pipeline.ingest.limits import IngestLimits, whole_read_peak
from pipeline.ingest.markup import HTML_SUFFIXES, MARKDOWN_SUFFIXES, is_sgml_submission
from pipeline.ingest.ocr import OcrSettings, engine
from pipeline.ingest.ocr_cache import OcrCache
from pipeline.ingest.pdf import (
    PdfDocument,
    documents_to_table,
    pdf_doc_error_id,
    with_ocr,
)
from pipeline.ingest.profiles import SHIPPED_DIR, BankProfile, load_profiles
from pipeline.ingest.transactions import (
    TRANSACTION_SUFFIXES,
    content_suffix,
    file_unit_id,
    is_streamable,
    log_format,
    rows_to_table,
)
from pipeline.ingest.worker import (
    FileFailure,
    FileTask,
    FileWorker,
    ParsedOcr,
    ParsedPdf,
    changed_since_hashed,
)
from schemas import FACT_ARROW_SCHEMA

FILE_ARROW_SCHEMA = pa.schema(
    [
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),  # pdf | einvoice | markup | transactions | unsupported | skipped
        pa.field("sha256", pa.string(), nullable=False),
        pa.field("size_bytes", pa.int64(), nullable=False),
        pa.field("status", pa.string(), nullable=False),  # ok | error | partial | duplicate | skipped
        pa.field("n_rows", pa.int64(), nullable=False),  # canonical transactions produced
        pa.field("n_errors", pa.int64(), nullable=False),
        pa.field("n_records", pa.int64(), nullable=False),  # data records the reader saw in a log (good and bad)
        pa.field("details", pa.string(), nullable=True),  # JSON: how a log was read
    ]
)
@dataclass(frozen=True)
class SpooledLog:
    """A large log read in batches: its rows (`stream_log.SPOOL_SCHEMA`) are in a Parquet file, not in memory."""

    source_file: str
    sha: str
    path: str
    n_rows: int


class SpoolDir:
    """A temporary folder for the spool files of one ingest, made when the first large log is streamed (an ingest
    without one leaves nothing behind, even when its process is killed) and removed when no result refers to it
    any more."""

    def __init__(self) -> None:
        self._path: Path | None = None

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = Path(tempfile.mkdtemp(prefix="pipeline-spool-"))
            weakref.finalize(self, shutil.rmtree, self._path, True)
        return self._path


@dataclass
class IngestResult:
    """Arrow tables produced by ingestion; `files` lists every input file exactly once."""

    input_dir: str
    documents: pa.Table
    transactions: pa.Table
    errors: pa.Table
    files: pa.Table
    excluded: int = 0  # files left out by the user's --exclude globs (not listed in `files`)
    facts: pa.Table = field(default_factory=FACT_ARROW_SCHEMA.empty_table)  # filing facts (inline XBRL, statement tables)
    # delimited logs whose column roles detection could not settle, by source_file (their error rows stand
    # unless the model's reading of them passes the values' check: `pipeline.infer.layouts`)
    layout_questions: dict[str, LayoutQuestion] = field(default_factory=dict)
    # logs larger than IngestLimits.stream_log_bytes, read in batches: their rows are not in `transactions`
    spooled: list[SpooledLog] = field(default_factory=list)
    spool_dir: SpoolDir | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # wall time by step (hash, parse_*, ocr): the run's timings

    def file_sha(self) -> dict[str, str]:
        return dict(zip(self.files.column("source_file").to_pylist(), self.files.column("sha256").to_pylist()))


def _is_hidden(rel: Path) -> bool:
    return any(part.startswith((".", "_")) for part in rel.parts)


def printable_name(rel: str) -> str:
    """A relative path as valid UTF-8 text: bytes that are not UTF-8 (Python keeps them as surrogate escapes,
    which Arrow strings cannot hold) are written as \\xNN, so the row names the file a user can still find."""
    try:
        rel.encode("utf-8")
        return rel
    except UnicodeEncodeError:
        return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def excluded_by(rel: str, globs: tuple[str, ...]) -> bool:
    """Whether a relative path matches an `--exclude` glob: the path itself (`*.tmp`, `logs/old_*.csv`) or a
    folder above it (`archive`, `archive/2023`)."""
    return any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(rel, g.rstrip("/") + "/*") for g in globs)


def discover(input_dir: Path, exclude: tuple[Path, ...] = (), exclude_globs: tuple[str, ...] = ()
             ) -> tuple[list[Path], list[Path]]:
    """(inputs, skipped): regular files under input_dir, each sorted by relative path. Hidden and `_`-prefixed
    paths are skipped (each still gets a `Skipped` error row from `ingest`); `exclude` trees (the run's own
    output folder inside the input) and paths matching the user's `exclude_globs` are left out entirely (the
    manifest counts the latter)."""
    return _walk(input_dir, exclude, exclude_globs)[:2]


def _walk(input_dir: Path, exclude: tuple[Path, ...], exclude_globs: tuple[str, ...]
          ) -> tuple[list[Path], list[Path], int]:
    root = input_dir.resolve()
    excl = tuple(p.resolve() for p in exclude)
    inputs, skipped, n_excluded = [], [], 0
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink() or any(path.resolve().is_relative_to(e) for e in excl):
            continue
        rel = path.relative_to(root)
        if excluded_by(rel.as_posix(), exclude_globs):
            n_excluded += 1
            continue
        (skipped if _is_hidden(rel) else inputs).append(path)

    def order(paths: list[Path]) -> list[Path]:
        return sorted(paths, key=lambda p: p.relative_to(root).as_posix())

    return order(inputs), order(skipped), n_excluded


def discover_files(input_dir: Path, exclude: tuple[Path, ...] = (), exclude_globs: tuple[str, ...] = ()) -> list[Path]:
    """The files `ingest` reads (see `discover`)."""
    return discover(input_dir, exclude, exclude_globs)[0]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _state(path: Path) -> tuple[int, int, int] | None:
    """What says a file was rewritten or replaced: size, modification time (ns) and inode."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


# Kinds whose file is one document: a failure to read it is that document's error row.
DOCUMENT_KINDS = ("pdf", "einvoice", "markup")


def file_kind(rel: str, head: bytes) -> str:
    """pdf, einvoice (a standalone CII/UBL e-invoice XML), markup (HTML, Markdown, an EDGAR SGML submission),
    transactions or unsupported; `head` is the file's first bytes (enough of an XML file to reach its root
    element)."""
    suffix = Path(rel).suffix.lower()
    if b"%PDF-" in head[:1024]:  # the PDF header may follow a little junk
        return "pdf"
    if suffix == ".pdf":  # named a PDF but not one: a transaction log saved under the wrong name is read as one
        return "transactions" if content_suffix(head) else "pdf"
    if suffix == ".xml" and is_einvoice_xml(head):
        return "einvoice"
    if suffix in HTML_SUFFIXES + MARKDOWN_SUFFIXES or is_sgml_submission(head):
        return "markup"
    if suffix in TRANSACTION_SUFFIXES or content_suffix(head):
        return "transactions"
    return "unsupported"


def _head(path: Path, n: int = 64 * 1024) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


@dataclass(frozen=True)
class _Reader:
    """How each file is read: the limits, the worker process that parses it, and the bank-log settings."""

    limits: IngestLimits
    worker: FileWorker
    default_currency: str | None
    profiles: tuple[BankProfile, ...]
    spool_dir: SpoolDir
    ocr_cache: OcrCache | None = None  # page texts read by earlier runs (`pipeline.ingest.ocr_cache`)


@dataclass
class _Collected:
    """What the files read so far have given: their file entries, documents, transaction tables and error rows,
    and the content hashes seen (a second copy of a file is a duplicate)."""

    files: list[dict] = field(default_factory=list)
    docs: list[PdfDocument | None] = field(default_factory=list)  # None: a scan's place until its pages are read
    tx_tables: list[pa.Table] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    seen: dict[str, str] = field(default_factory=dict)
    questions: dict[str, LayoutQuestion] = field(default_factory=dict)
    spooled: list[SpooledLog] = field(default_factory=list)
    ocr_pending: list[_PendingOcr] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # wall time by step: hash, parse_documents, parse_logs, ocr

    def clock(self, step: str, since: float) -> None:
        self.seconds[step] = self.seconds.get(step, 0.0) + time.perf_counter() - since


def _ingest_one(path: Path, rel: str, reader: _Reader, out: _Collected) -> None:
    """One file into its outputs or its error row; nothing that goes wrong here stops the run."""
    limits, worker, seen, files, docs, tx_tables, errors = (reader.limits, reader.worker, out.seen, out.files,
                                                            out.docs, out.tx_tables, out.errors)
    size, read_error, state, t0 = _size(path), None, _state(path), time.perf_counter()
    try:  # streamed: identity and kind without holding the file's bytes
        sha, head = file_sha256(path), _head(path)
    except OSError as exc:  # permission denied, EIO, vanished
        read_error = f"{type(exc).__name__}: {exc.strerror or exc}"
        sha, head = sha256_bytes(b"unreadable:" + rel.encode()), b""  # its path stands in for its content
    out.clock("hash", t0)
    kind = file_kind(rel, head)
    entry = {"source_file": rel, "kind": kind, "sha256": sha, "size_bytes": size, "status": "ok",
             "n_rows": 0, "n_errors": 0, "n_records": 0, "details": None}
    files.append(entry)

    def file_error(cls: str, msg: str, stage: str = Stage.INGEST) -> None:
        _file_error(out, entry, cls, msg, stage)

    if read_error is not None:
        file_error("UnreadableFile", f"cannot read the file ({read_error})", Stage.DISCOVER)
        return
    if sha in seen:
        file_error("DuplicateFile", f"same content as {seen[sha]} (processed once, under that path)", Stage.DISCOVER)
        entry["status"] = "duplicate"
        return
    seen[sha] = rel
    if kind == "unsupported":
        file_error("UnsupportedFormat", f"'{Path(rel).suffix or '(no extension)'}' files are not ingested; "
                   "expected PDF, HTML, Markdown, an EDGAR submission, CSV/TSV/TXT/DAT, JSONL/JSON, Parquet, "
                   "OFX/QFX, QIF, MT940, CAMT XML or XLS/XLSX/ODS", Stage.DISCOVER)
        return
    streamed = kind == "transactions" and size > limits.stream_log_bytes and is_streamable(rel, head)
    if streamed and size > limits.max_log_bytes:
        file_error("FileTooLarge", f"{size:,} bytes, over the limit of {limits.max_log_bytes:,} for a log read in "
                   "batches (max_log_bytes)")
        return
    if not streamed and size > limits.max_file_bytes:
        file_error("FileTooLarge", f"{size:,} bytes, over the limit of {limits.max_file_bytes:,} (max_file_bytes; "
                   "raise it with --max-file-mb, or split the file)")
        return
    budget = None
    if kind == "transactions" and not streamed:
        fmt = log_format(rel, head).name
        if (need := whole_read_peak(fmt, size)) > limits.max_worker_memory_bytes:
            file_error("FileTooLarge", f"{size:,} bytes of {fmt} are read whole, which needs about {need >> 20:,} "
                       f"MiB, over the parser's limit of {limits.max_worker_memory_bytes >> 20:,} MiB "
                       "(raise it with --max-worker-memory-mb, or split the file)")
            return
        budget = limits.seconds_for(size, fmt)
    t0 = time.perf_counter()
    parsed = worker.parse(FileTask(kind, str(path), rel, sha, reader.default_currency, reader.profiles,
                                   spool_dir=str(reader.spool_dir.path) if streamed else None), size, budget)
    out.clock("parse_logs" if kind == "transactions" else "parse_documents", t0)
    if not isinstance(parsed, FileFailure) and _state(path) != state:  # grown, rewritten or replaced since hashed
        parsed = changed_since_hashed()
    if isinstance(parsed, FileFailure):
        file_error(parsed.error_class, parsed.message)
    elif isinstance(parsed, ParsedPdf):  # a PDF, or a standalone e-invoice XML read as a document
        result = parsed.result
        if isinstance(result, PdfDocument) and result.ocr_pages:  # read after the other files (_read_scans)
            out.ocr_pending.append(_PendingOcr(result, path, state, entry, len(docs)))
            docs.append(None)
            return
        _add_document(out, entry, result)
    else:
        if parsed.question is not None:
            out.questions[rel] = parsed.question
        if parsed.spool is not None:
            out.spooled.append(SpooledLog(rel, sha, parsed.spool, parsed.spool_rows))
        tx_tables.append(parsed.rows)
        errors.extend(parsed.errors)
        n_rows = parsed.spool_rows if parsed.spool is not None else parsed.rows.num_rows
        entry["n_rows"], entry["n_errors"] = n_rows, len(parsed.errors)
        entry["n_records"] = parsed.n_records
        entry["status"] = "ok" if not parsed.errors else ("partial" if n_rows else "error")
        entry["details"] = json.dumps(parsed.details, ensure_ascii=False, default=str) if parsed.details else None


def _file_error(out: _Collected, entry: dict, cls: str, msg: str, stage: str = Stage.INGEST) -> None:
    """The file's error row: a document's when a PDF (or other one-document file) failed to read, else the
    file's."""
    kind, sha, rel = entry["kind"], entry["sha256"], entry["source_file"]
    if kind in DOCUMENT_KINDS and stage == Stage.INGEST:  # a PDF that fails to read is a document that failed
        out.errors.append(ErrorRecord(row_id=pdf_doc_error_id(sha), unit=Unit.DOCUMENT, source_file=rel,
                                      stage=stage, error_class=cls, message=msg))
    else:
        out.errors.append(ErrorRecord(row_id=file_unit_id(sha, rel), unit=Unit.FILE, source_file=rel,
                                      stage=stage, error_class=cls, message=msg, n_rows=0))
    entry["status"], entry["n_errors"] = "error", 1


def _add_document(out: _Collected, entry: dict, result: PdfDocument | ErrorRecord, at: int | None = None) -> None:
    """A read document into the outputs (at its place `at` when its pages were OCRed after the others were
    read), or its error row."""
    if isinstance(result, ErrorRecord):
        out.errors.append(result)
        entry["status"], entry["n_errors"] = "error", 1
        return
    if at is None:
        out.docs.append(result)
    else:
        out.docs[at] = result
    if result.ocred_pages:
        entry["details"] = json.dumps({"ocred_pages": result.ocred_pages, "ocr_engine": result.ocr_engine})
    elif result.parts_not_read:
        entry["details"] = json.dumps({"parts_not_read": result.parts_not_read})


@dataclass(frozen=True)
class _PendingOcr:
    """A PDF whose pages without a text layer wait for OCR, and its place among the documents read."""

    doc: PdfDocument
    path: Path
    state: tuple[int, int, int] | None  # as hashed (`_state`)
    entry: dict  # its file entry: name, hash and size
    index: int


def _read_scans(out: _Collected, reader: _Reader, progress: bool = False) -> None:
    """OCR every pending scan, `reader.limits.ocr_workers` files at a time, each in its own worker process on its
    share of the cores (one by default: IngestLimits.ocr_workers says why)."""
    jobs, out.ocr_pending = out.ocr_pending, []
    if not jobs:
        return
    t0 = time.perf_counter()
    n = min(len(jobs), reader.limits.ocr_workers)
    idle: queue.SimpleQueue[FileWorker] = queue.SimpleQueue()
    idle.put(reader.worker)
    extra = [FileWorker(reader.limits) for _ in range(n - 1)]
    for w in extra:
        idle.put(w)

    def read(job: _PendingOcr) -> PdfDocument | ErrorRecord:
        worker = idle.get()
        try:
            return _with_ocr(job, reader.limits, worker, reader.ocr_cache)
        finally:
            idle.put(worker)

    try:
        with ThreadPoolExecutor(n, thread_name_prefix="ocr") as pool:  # threads only wait on the workers' pipes
            results = pool.map(read, jobs)
            if progress:
                # lazy: only a progress bar needs it
                from tqdm import tqdm

                results = tqdm(results, total=len(jobs), desc="ocr", unit="file", leave=False)
            for job, result in zip(jobs, results):
                if _state(job.path) != job.state:  # changed while its pages were OCRed
                    changed = changed_since_hashed()
                    _file_error(out, job.entry, changed.error_class, changed.message)
                else:
                    _add_document(out, job.entry, result, at=job.index)
    finally:
        for w in extra:
            w.close()
    out.docs = [d for d in out.docs if d is not None]
    out.clock("ocr", t0)


def _with_ocr(job: _PendingOcr, limits: IngestLimits, worker: FileWorker,
              cache: OcrCache | None = None) -> PdfDocument | ErrorRecord:
    """OCR of the document's pages without a text layer, in the worker under its own time budget; pages an
    earlier run read with the same settings come from `cache`."""
    doc, path, rel, sha, size = job.doc, job.path, job.entry["source_file"], job.entry["sha256"], job.entry["size_bytes"]
    if not limits.ocr:
        return with_ocr(doc, {}, None, "OCR is off")
    name = engine(runtime=limits.ocr_runtime)
    if name is None:
        return with_ocr(doc, {}, None, f"no OCR engine is installed (rapidocr with {limits.ocr_runtime}, or "
                                       "Tesseract)")
    pages = tuple(doc.ocr_pages[: limits.max_ocr_pages])
    # what the worker reads with (its thread count does not change the text)
    label = OcrSettings(runtime=limits.ocr_runtime).label()
    if cache is not None and (known := cache.get(sha, pages, label)) is not None:
        return with_ocr(doc, known.texts, known.engine)
    out = worker.parse(FileTask("ocr", str(path), rel, sha, pages=pages), size,
                       budget=limits.ocr_seconds_per_page * len(pages) + limits.parse_seconds)
    if isinstance(out, FileFailure):
        return with_ocr(doc, {}, None, f"OCR failed ({out.error_class}: {out.message})")
    if not isinstance(out, ParsedOcr):
        return with_ocr(doc, {}, None, f"OCR failed (unexpected {type(out).__name__})")
    if cache is not None and _state(path) == job.state:  # never a rewritten file's text under the old hash
        cache.put(sha, pages, label, out.result)
    return with_ocr(doc, out.result.texts, out.result.engine)


def ingest(
    input_dir: str | Path,
    *,
    limit: int | None = None,
    default_currency: str | None = None,
    exclude: tuple[Path | str, ...] = (),
    limits: IngestLimits | None = None,
    progress: bool = False,
    worker: FileWorker | None = None,
    bank_profiles: tuple[BankProfile, ...] | None = None,
    ocr_cache: Path | None = None,
) -> IngestResult:
    """Read every input file (the first `limit` in path order when given; `exclude`: folders such as the output
    as Paths, and globs relative to `input_dir` as strings, left out on purpose) into Arrow tables; each file is parsed
    in a worker process under `limits` (`pipeline.ingest.worker`; `worker` passes one in). Delimited logs are
    read as the first matching `bank_profiles` entry says (default: the shipped profiles). Scanned pages read by
    an earlier run with the same settings come from `ocr_cache` (a folder) when given."""
    root = Path(input_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"input directory not found: {root}")
    paths, skipped, n_excluded = _walk(root, tuple(p for p in exclude if isinstance(p, Path)),
                                       tuple(g for g in exclude if isinstance(g, str)))
    if limit is not None:
        paths = paths[:limit]
    limits = limits or IngestLimits()
    profiles = load_profiles(SHIPPED_DIR) if bank_profiles is None else bank_profiles
    out = _Collected()
    iterator = paths
    if progress:
        # lazy: only a progress bar needs it
        from tqdm import tqdm

        iterator = tqdm(paths, desc="ingest", unit="file", leave=False)
    base = root.resolve()
    for path in skipped:
        rel = printable_name(path.relative_to(base).as_posix())
        sha = sha256_bytes(b"skipped:" + rel.encode())  # identity from the path: a skipped file is never read
        out.files.append({"source_file": rel, "kind": "skipped", "sha256": sha, "size_bytes": _size(path),
                          "status": "skipped", "n_rows": 0, "n_errors": 1, "n_records": 0, "details": None})
        out.errors.append(ErrorRecord(row_id=file_unit_id(sha, rel), unit=Unit.FILE, source_file=rel,
                                      stage=Stage.DISCOVER, error_class="Skipped",
                                      message="skipped: hidden or '_'-prefixed path (not ingested; rename it to "
                                              "include it, or pass --exclude to leave it out without an error row)",
                                      n_rows=0))
    own = worker is None
    spool_dir = SpoolDir()
    reader = _Reader(limits, worker or FileWorker(limits), default_currency, profiles, spool_dir,
                     OcrCache(ocr_cache) if ocr_cache is not None else None)
    try:
        for path in iterator:
            _ingest_one(path, printable_name(path.relative_to(base).as_posix()), reader, out)
        _read_scans(out, reader, progress)
    finally:
        if own:
            reader.worker.close()
    return IngestResult(
        input_dir=str(root),
        documents=documents_to_table(out.docs),
        facts=facts_to_table(out.docs),
        transactions=pa.concat_tables([rows_to_table([]), *out.tx_tables]),
        errors=errors_to_table(out.errors),
        files=pa.Table.from_pylist(out.files, schema=FILE_ARROW_SCHEMA),
        excluded=n_excluded,
        layout_questions=out.questions,
        spooled=out.spooled,
        spool_dir=spool_dir,
        seconds=out.seconds,
    )


def reread_with_profiles(result: IngestResult, chosen: dict[str, BankProfile], *, limits: IngestLimits | None = None,
                         default_currency: str | None = None) -> IngestResult:
    """`result` with each log in `chosen` (source_file -> the profile the model's checked reading gave) read
    again with its profile, in a worker under the same limits: its file-level error row gives way to what the
    read yields, and its file entry says `layout_source: model`."""
    if not chosen:
        return result
    root, limits = Path(result.input_dir), limits or IngestLimits()
    out = _Collected()
    spool_dir = result.spool_dir or SpoolDir()
    with FileWorker(limits) as worker:
        for rel, profile in chosen.items():
            _ingest_one(root / rel, rel, _Reader(limits, worker, default_currency, (profile,), spool_dir), out)
    new_entries = {}
    for entry in out.files:
        details = json.loads(entry["details"]) if entry["details"] else {}
        entry["details"] = json.dumps({**details, "layout_source": "model"}, ensure_ascii=False)
        new_entries[entry["source_file"]] = entry
    files = [new_entries.get(f["source_file"], f) for f in result.files.to_pylist()]
    old_errors = result.errors.filter(pa.array([s not in chosen for s in result.errors.column("source_file").to_pylist()],
                                               pa.bool_()))
    return dataclasses.replace(
        result,
        files=pa.Table.from_pylist(files, schema=FILE_ARROW_SCHEMA),
        errors=pa.concat_tables([old_errors, errors_to_table(out.errors)]),
        transactions=pa.concat_tables([result.transactions, *out.tx_tables]),
        layout_questions={k: v for k, v in result.layout_questions.items() if k not in chosen},
        spooled=[*result.spooled, *out.spooled], spool_dir=spool_dir,
    )


def annotate_file_errors(result: IngestResult, notes: dict[str, str]) -> IngestResult:
    """`result` with `notes[source_file]` added to that file's file-level error message."""
    if not notes:
        return result
    rows = result.errors.to_pylist()
    for row in rows:
        if row["source_file"] in notes and row["unit"] == Unit.FILE:
            row["message"] = f"{row['message']}; {notes[row['source_file']]}"
    return dataclasses.replace(result, errors=pa.Table.from_pylist(rows, schema=result.errors.schema))

