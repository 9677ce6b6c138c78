"""`pipeline eval`: field-level exact-match accuracy and schema validity on the held-out gold set.

The gold set (data/eval, generated with a seed never used in training) holds PDFs with gold
extractions and canonical transactions with gold window summaries. Documents go through the
same text path as ingestion (pypdf -> pipeline.ingest.pdf_text -> pipeline.plan.prompts); windows through
pipeline.plan.windows. Decoding is greedy and schema-constrained via the engine's public API, with
document dates, amounts and accounts grounded in the document's text as in `pipeline run`
(`--no-grounding` measures the model alone); outputs are validated with pydantic. Image-only
documents need OCR and are not scored.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError
from pypdf import PdfReader

from engine import (
    LLM,
    SamplingParams,
    add_engine_args,
    export_hf_checkpoint,
    load_tokenizer,
)
from eval.real_gold import SCORED_FIELDS, field_matches, load_gold_dir
from pipeline.config import (
    add_speculative_args,
    default_model_dir,
    demo_model_dir,
    speculative_config,
)
from pipeline.grounding import field_confidence, focused_text
from pipeline.identity import sha256_bytes
from pipeline.infer.validate import decoding_schema
from pipeline.ingest.einvoice import einvoice_fields
from pipeline.ingest.ocr import OcrSettings, engine, ocr_pdf_pages
from pipeline.ingest.ocr_cache import OcrCache
from pipeline.ingest.pdf import PdfDocument, read_pdf, with_ocr
from pipeline.ingest.pdf_text import document_text, page_texts
from pipeline.models import model_parts, resolve_model
from pipeline.plan.prompts import chat_template_sha, encode_prompt, prompt_version
from pipeline.plan.windows import window_facts
from schemas import AccountWindowSummary, DocumentExtraction

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
DEFAULT_EVAL_DIR = DATA_DIR / "eval"
DEMO_MODEL_DIR = demo_model_dir()  # the 3.7M demo model: the tests' fast model
MAX_ANSWER_TOKENS = 256


@dataclass
class EvalItem:
    """One scored request: what its prompt states, gold fields and the output model it must validate as. The
    prompt itself is rendered per model (`pipeline.plan.prompts.encode_prompt`: chat template or completion style)."""

    id: str
    kind: str  # "document" | "window"
    gold: dict[str, Any]
    model: type[BaseModel]
    document_text: str | None = None  # documents: the text in the prompt (grounding scans it)
    facts: dict[str, Any] | None = None  # windows: the facts the prompt states
    real: bool = False  # a real gold set: fields compared with `eval.real_gold.field_matches`
    embedded: dict[str, Any] | None = None  # the fields its embedded e-invoice XML states (`pipeline.ingest.einvoice`)
    ocr: bool = False  # some of its text was read by OCR

    def prompt_ids(self, tokenizer: Any, grounding: bool = True) -> list[int]:
        """Grounded, a document's prompt shows the lines its candidates lie on, as `pipeline run`'s does; the model
        alone reads the whole text."""
        text = self.document_text or ""
        if grounding and self.kind == "document":
            text = focused_text(text)
        return encode_prompt(tokenizer, self.kind, text=text, facts=self.facts)


def _matches(item: EvalItem, name: str, pred: Any, gold: Any) -> bool:
    if item.real:

        return field_matches(name, pred, gold)
    return bool(pred == gold)


@dataclass
class FieldTally:
    correct: int = 0
    total: int = 0


MAX_FAILURES = 50  # failing items listed in full in the report (outputs of every item are in "outputs")


@dataclass
class Scores:
    """Running tallies; `report` turns them into the JSON report."""

    fields: dict[str, FieldTally] = field(default_factory=dict)
    valid: dict[str, int] = field(default_factory=lambda: {"document": 0, "window": 0})
    count: dict[str, int] = field(default_factory=lambda: {"document": 0, "window": 0})
    exact: dict[str, int] = field(default_factory=lambda: {"document": 0, "window": 0})
    failures: list[dict[str, Any]] = field(default_factory=list)
    failures_left_off: int = 0  # failing items past MAX_FAILURES: counted, their outputs are in "outputs"
    confident: dict[str, FieldTally] = field(default_factory=dict)  # of the fields a row marks confident, right

    def add(self, item: EvalItem, text: str) -> None:
        self.count[item.kind] += 1
        pred: dict[str, Any] | None = None
        try:
            pred = item.model.model_validate_json(text).model_dump(mode="json")
            self.valid[item.kind] += 1
        except (ValidationError, ValueError):
            pred = None
        wrong = []
        sure = _confidence(item, pred)
        for name, gold_value in item.gold.items():
            tally = self.fields.setdefault(f"{item.kind}.{name}", FieldTally())
            tally.total += 1
            right = pred is not None and _matches(item, name, pred.get(name), gold_value)
            tally.correct += right
            if not right:
                wrong.append(name)
            if sure.get(name):
                conf = self.confident.setdefault(f"{item.kind}.{name}", FieldTally())
                conf.total += 1
                conf.correct += right
        if not wrong:
            self.exact[item.kind] += 1
        elif len(self.failures) < MAX_FAILURES:
            self.failures.append({"id": item.id, "wrong_fields": wrong, "output": text, "gold": item.gold})
        else:
            self.failures_left_off += 1

    def report(self) -> dict[str, Any]:
        correct = sum(t.correct for t in self.fields.values())
        total = sum(t.total for t in self.fields.values())
        n = sum(self.count.values())
        return {
            "overall_accuracy": correct / total if total else 0.0,
            "schema_validity": sum(self.valid.values()) / n if n else 0.0,
            "fields": {name: {"accuracy": t.correct / t.total if t.total else 0.0, "correct": t.correct,
                              "total": t.total} for name, t in sorted(self.fields.items())},
            "by_kind": {kind: {"count": self.count[kind],
                               "schema_validity": self.valid[kind] / self.count[kind] if self.count[kind] else 0.0,
                               "exact_match": self.exact[kind] / self.count[kind] if self.count[kind] else 0.0}
                        for kind in self.count},
            "failures": self.failures,
            "failures_left_off": self.failures_left_off,
            "confident": _confident_report(self.confident, total),
        }


def _confidence(item: EvalItem, pred: dict[str, Any] | None) -> dict[str, bool]:
    """The per-field confidence `pipeline run` writes for this output (real documents only)."""
    if not item.real or pred is None:
        return {}
    if item.embedded is not None:
        return {name: True for name in item.gold}

    return field_confidence(pred, item.document_text or "", ocr=item.ocr)


def _confident_report(tallies: dict[str, FieldTally], total: int) -> dict[str, Any] | None:
    """Precision of the fields marked confident, and their share of all scored fields."""
    if not tallies:
        return None
    n = sum(t.total for t in tallies.values())
    right = sum(t.correct for t in tallies.values())
    return {"precision": right / n if n else 0.0, "marked": n, "right": right, "share_of_fields": n / total if total else 0.0,
            "fields": {k: {"marked": t.total, "right": t.correct} for k, t in sorted(tallies.items())}}


def load_items(eval_dir: Path, limit: int | None = None) -> tuple[list[EvalItem], int]:
    """Scored items (documents first, then windows; `limit` caps each) and the number of skipped scans."""


    docs_meta = [json.loads(line) for line in (eval_dir / "documents.jsonl").open(encoding="utf-8")]
    skipped = sum(1 for d in docs_meta if d["needs_ocr"])
    docs_meta = [d for d in docs_meta if not d["needs_ocr"]][:limit]
    items = []
    for d in docs_meta:
        text = document_text(page_texts(PdfReader(eval_dir / d["file"])))
        items.append(EvalItem(d["id"], "document", d["gold"], DocumentExtraction, document_text=text))


    windows = [json.loads(line) for line in (eval_dir / "windows.jsonl").open(encoding="utf-8")][:limit]
    facts = {(f["account"], f["period_start"]): f for f in window_facts(pq.read_table(eval_dir / "transactions.parquet"))}
    for w in windows:
        key = (w["facts"]["account"], w["facts"]["period_start"])
        if facts.get(key) != w["facts"]:
            raise ValueError(f"window facts for {w['id']} no longer match the gold set; regenerate data/eval")
        items.append(EvalItem(w["id"], "window", w["gold"], AccountWindowSummary, facts=facts[key]))
    return items, skipped


def _read_gold_pdf(pdf: Path, text_cache: Path | None) -> Any:
    """The PDF as `pipeline run` reads it: pypdf's text, OCR on pages without a text layer. `text_cache` keeps OCR's
    page texts per file content and OCR settings (`pipeline.ingest.ocr_cache`, as `pipeline run` keeps its own), so
    repeated evaluations of a scanned set OCR each page once."""
    data = pdf.read_bytes()
    read = read_pdf(data, pdf.name, allow_no_text=True)
    if not isinstance(read, PdfDocument) or not read.ocr_pages or engine() is None:
        return read
    settings, cache = OcrSettings(), OcrCache(text_cache) if text_cache is not None else None
    key = (sha256_bytes(data), tuple(read.ocr_pages), settings.label())
    if cache is not None and (known := cache.get(*key)) is not None:
        return with_ocr(read, known.texts, known.engine)
    result = ocr_pdf_pages(data, read.ocr_pages, settings)
    if cache is not None:
        cache.put(*key, result)
    return with_ocr(read, result.texts, result.engine)


def load_gold_items(gold_dir: Path, limit: int | None = None, extraction: str = "auto", split: str = "all",
                    text_cache: Path | None = None) -> tuple[list[EvalItem], int]:
    """Scored items of a real gold set (`eval.real_gold`): each PDF read as `pipeline run` reads it (OCR on
    scanned pages), its embedded e-invoice parsed when `extraction="auto"`. A PDF the pipeline cannot read scores
    as all wrong."""

    items = []
    for doc in load_gold_dir(gold_dir, split)[:limit]:
        read = _read_gold_pdf(doc.pdf, text_cache)
        text = read.text if isinstance(read, PdfDocument) else ""
        embedded = None
        if extraction == "auto" and isinstance(read, PdfDocument) and read.einvoice_xml:
            embedded = einvoice_fields(read.einvoice_xml)
        gold = {k: doc.gold[k] for k in SCORED_FIELDS}
        ocr = isinstance(read, PdfDocument) and bool(read.ocred_pages)
        items.append(EvalItem(doc.id, "document", gold, DocumentExtraction, document_text=text, real=True,
                              embedded=embedded, ocr=ocr))
    return items, 0


def eval_engine(model_dir: Path, quantization: str | None = None, kv_cache_dtype: str = "auto",
                speculative: dict[str, Any] | None = None) -> Any:
    """The engine `pipeline eval` measures: the model (an adapter over its base) in its default dtype, seed 0."""

    base, adapter = model_parts(model_dir)
    return LLM(str(base), dtype="auto", quantization=quantization, kv_cache_dtype=kv_cache_dtype, seed=0,
               adapter=str(adapter) if adapter else None, speculative_config=speculative)


def _generate_engine(llm: Any, token_ids: list[list[int]], schemas: list[dict[str, Any]],
                     progress: bool) -> tuple[list[str], dict[str, Any]]:

    params = [SamplingParams(max_tokens=MAX_ANSWER_TOKENS, temperature=0.0, json_schema=s) for s in schemas]
    start = time.perf_counter()
    outs = llm.generate(token_ids, params, progress=progress)
    wall = time.perf_counter() - start
    return [o.outputs[0].text for o in outs], {"engine": llm.config_summary(), "engine_stats": llm.stats(),
                                    "generate_seconds": round(wall, 3)}


def _generate_hf(model_dir: Path, token_ids: list[list[int]], progress: bool) -> tuple[list[str], dict[str, Any]]:
    """Unconstrained greedy decoding with transformers (reference path; schema validity is then earned). A GGUF
    file is first exported to a Hugging Face directory (the engine's own dequantization), which transformers
    then loads like any checkpoint."""

    # lazy: heavy: loaded where a model runs
    import torch

    # lazy: heavy, and only the HF baselines and loading checks need it
    from transformers import AutoModelForCausalLM


    tmp = None
    if model_dir.is_file():
        tmp = tempfile.TemporaryDirectory(prefix="eval-hf-")
        model_dir = export_hf_checkpoint(model_dir, Path(tmp.name) / "model")
    tok = load_tokenizer(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    eos = model.config.eos_token_id
    eos = eos[0] if isinstance(eos, list) else eos
    texts = []
    with torch.no_grad():
        for i, ids in enumerate(token_ids):
            out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 max_new_tokens=MAX_ANSWER_TOKENS, do_sample=False, eos_token_id=eos, pad_token_id=eos)
            gen = out[0, len(ids):].tolist()
            texts.append(tok.decode(gen[:gen.index(eos)] if eos in gen else gen))
            if progress and (i + 1) % 25 == 0:
                print(f"  {i + 1}/{len(token_ids)}", flush=True)
    if tmp is not None:
        tmp.cleanup()
    return texts, {"engine": {"backend": "transformers", "dtype": "float32"}}


def compare_reports(report: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """How far `report` moved from `baseline` (e.g. int8 vs the default): accuracy delta and the share of items
    whose generated text is byte-identical, over the items both reports hold."""
    ours, theirs = report.get("outputs") or {}, baseline.get("outputs") or {}
    shared = sorted(set(ours) & set(theirs))
    if not shared:
        raise ValueError("the baseline report has no outputs in common with this run (was it written by "
                         "`pipeline eval --json` on the same gold set?)")
    identical = sum(ours[i] == theirs[i] for i in shared)
    return {
        "baseline_model_dir": baseline.get("model_dir"), "baseline_quantization": baseline.get("quantization"),
        "baseline_overall_accuracy": baseline["overall_accuracy"],
        "accuracy_delta_points": round(100 * (report["overall_accuracy"] - baseline["overall_accuracy"]), 2),
        "items_compared": len(shared), "identical_outputs": identical, "identical_share": identical / len(shared),
    }


def run_eval(model_dir: str | Path | None = None, quantization: str | None = None, json_path: str | Path | None = None,
             limit: int | None = None, eval_dir: str | Path | None = None, backend: str = "engine",
             progress: bool = False, compare_to: str | Path | None = None, grounding: bool = True,
             kv_cache_dtype: str = "auto", gold_dir: str | Path | None = None,
             extraction: str = "auto", speculative: dict[str, Any] | None = None,
             llm: Any = None, split: str = "all", text_cache: str | Path | None = None) -> dict[str, Any]:
    """Score the model on the gold set; returns (and optionally writes) the JSON report.

    `speculative`: an engine speculative_config (greedy decoding: the outputs must not change; `compare_to` a
    report without it shows they do not, and the report carries the acceptance counters). `llm`: an engine from
    `eval_engine` to reuse (its stats are cumulative); otherwise one is loaded.

    `gold_dir` scores a real gold set instead (`eval.real_gold`: invoice2data or ZUGFeRD JSON beside each PDF),
    with e-invoices read from their XML unless `extraction="model"`, as in `pipeline run`.

    `compare_to` names an earlier JSON report (say, the default precision) to diff this run's outputs against.
    `grounding` (engine backend) narrows document dates, amounts and accounts to the values each document
    prints, as `pipeline run` does; off, the model alone is measured under the plain schema."""

    model_dir = resolve_model(model_dir) if model_dir else default_model_dir()
    eval_dir = Path(eval_dir) if eval_dir else DEFAULT_EVAL_DIR
    if backend == "hf" and model_parts(model_dir)[1] is not None:
        raise ValueError("the hf backend does not load adapters; use the engine backend")
    if model_dir.is_dir() and model_parts(model_dir)[1] is None and not (model_dir / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{model_dir} has no tokenizer.json; pass --model DIR|FILE.gguf|NAME")
    if backend == "hf" and (quantization or kv_cache_dtype != "auto" or speculative):
        raise ValueError("quantization, kv_cache_dtype and speculative are only available with the engine backend")
    if backend not in ("engine", "hf"):
        raise ValueError(f"unknown backend {backend!r} (engine|hf)")
    if gold_dir is not None:
        items, skipped = load_gold_items(Path(gold_dir), limit, extraction, split,
                                         Path(text_cache) if text_cache else None)
    else:
        items, skipped = load_items(eval_dir, limit)
    tok = load_tokenizer(model_parts(model_dir)[0])
    model_items = [it for it in items if it.embedded is None]
    token_ids = [it.prompt_ids(tok, grounding and backend == "engine") for it in model_items]
    schemas = [decoding_schema(it.kind, it.document_text if grounding else None, it.facts if grounding else None)
               for it in model_items]
    start = time.perf_counter()
    texts: list[str] = []
    extra: dict[str, Any] = {}
    if model_items and backend == "engine":
        if llm is None:
            llm = eval_engine(model_dir, quantization, kv_cache_dtype, speculative)
        texts, extra = _generate_engine(llm, token_ids, schemas, progress)
    elif model_items:
        texts, extra = _generate_hf(model_dir, token_ids, progress)
    elapsed = time.perf_counter() - start
    generated = dict(zip((it.id for it in model_items), texts))
    texts = [generated[it.id] if it.embedded is None else json.dumps(it.embedded, ensure_ascii=False) for it in items]
    scores = Scores()
    for item, text in zip(items, texts):
        scores.add(item, text)
    report = {
        "model_dir": str(model_dir), "prompt_version": prompt_version(chat_template_sha(tok)), "quantization": quantization, "kv_cache_dtype": kv_cache_dtype, "backend": backend,
        "speculative": speculative,
        "grounding": grounding and backend == "engine",
        "eval_dir": str(gold_dir if gold_dir is not None else eval_dir), "gold_set": "real" if gold_dir else "synthetic",
        "extraction": extraction, "split": split if gold_dir is not None else None,
        "extraction_methods": {"embedded_xml": len(items) - len(model_items), "model": len(model_items)},
        "extraction_method_by_item": {it.id: "model" if it.embedded is None else "embedded_xml" for it in items},
        "n_documents": scores.count["document"], "n_windows": scores.count["window"],
        "skipped_needs_ocr": skipped, "generation_seconds": round(elapsed, 2), **scores.report(), **extra,
        "outputs": {item.id: text for item, text in zip(items, texts)},
    }
    if compare_to:
        report["comparison"] = compare_reports(report, json.loads(Path(compare_to).read_text(encoding="utf-8")))
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return report


def render_report(report: dict[str, Any]) -> None:
    """Per-field accuracy table plus the headline numbers."""
    # lazy: only console output needs it
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"eval: {report['n_documents']} documents, {report['n_windows']} windows "
                        f"({report['skipped_needs_ocr']} image-only skipped)")
    table.add_column("field")
    table.add_column("accuracy", justify="right")
    table.add_column("correct / total", justify="right")
    for name, f in report["fields"].items():
        table.add_row(name, f"{f['accuracy']:.1%}", f"{f['correct']} / {f['total']}")
    table.add_section()
    table.add_row("overall", f"{report['overall_accuracy']:.1%}", "")
    table.add_row("schema valid", f"{report['schema_validity']:.1%}", "")
    for kind, k in report["by_kind"].items():
        table.add_row(f"{kind} exact", f"{k['exact_match']:.1%}", str(k["count"]))
    console = Console()
    console.print(table)
    conf = report.get("confident")
    if conf:
        console.print(f"fields marked confident: {conf['marked']} ({conf['share_of_fields']:.1%} of all), "
                      f"{conf['right']} right ({conf['precision']:.1%})")
    methods = report.get("extraction_methods")
    if report.get("gold_set") == "real" and methods:
        console.print(f"real gold set {report['eval_dir']}: extraction {report['extraction']} "
                      f"({methods['embedded_xml']} from embedded XML, {methods['model']} by the model)")
    console.print(f"backend {report['backend']}, quantization {report['quantization']}, "
                  f"kv cache {report.get('kv_cache_dtype', 'auto')}, "
                  f"grounding {'on' if report.get('grounding') else 'off'}, generation {report['generation_seconds']} s")
    stats = report.get("engine_stats") or {}
    if report.get("speculative"):
        console.print(f"speculative {report['speculative']['method']}: {stats.get('spec_accepted_tokens', 0)} of "
                      f"{stats.get('spec_draft_tokens', 0)} drafted tokens accepted "
                      f"({stats.get('spec_acceptance_rate', 0.0):.1%}; {stats.get('spec_forced_tokens', 0)} forced "
                      f"by the grammar), {stats.get('spec_mean_accepted_length', 0.0):.2f} per verify step, "
                      f"{stats.get('steps', 0)} engine steps for {stats.get('output_tokens', 0)} output tokens")
    if "comparison" in report:
        c = report["comparison"]
        console.print(f"vs {c['baseline_model_dir']} (quantization {c['baseline_quantization']}): accuracy "
                      f"{c['accuracy_delta_points']:+.2f} points, identical outputs {c['identical_outputs']} / "
                      f"{c['items_compared']} ({c['identical_share']:.1%})")


def _cmd_eval(args: argparse.Namespace) -> int:
    try:
        report = run_eval(args.model, args.quantization, args.json, args.limit, args.eval_dir, args.backend,
                          progress=not args.no_progress, compare_to=args.compare_to, grounding=not args.no_grounding,
                          kv_cache_dtype=args.kv_cache_dtype, gold_dir=args.gold, extraction=args.extraction,
                          split=args.split, text_cache=args.text_cache,
                          speculative=speculative_config(args.speculative, args.num_speculative_tokens))
    except (FileNotFoundError, ValueError) as exc:
        print(f"pipeline eval: {exc}", file=sys.stderr)
        return 2
    render_report(report)
    return 0


def register(subparsers: Any) -> None:
    """Add the `eval` subcommand to the pipeline CLI."""
    p = subparsers.add_parser("eval", help="measure extraction quality on the held-out gold set",
                              description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="model directory, .gguf file or registered model name "
                                                "(default: as `pipeline run`, finextract-smollm2)")
    add_engine_args(p, ("quantization", "kv_cache_dtype"), kv_cache_dtype="auto")
    add_speculative_args(p)
    p.add_argument("--json", default=None, help="also write the JSON report here")
    p.add_argument("--limit", type=int, default=None, help="score only the first N documents and N windows")
    p.add_argument("--eval-dir", default=None, help="gold set directory (default data/eval)")
    p.add_argument("--gold", default=None, metavar="DIR",
                   help="score a real gold set instead: PDFs with a fields, invoice2data or ZUGFeRD/Factur-X header JSON "
                        "beside them (doc_type, issuer, invoice number, issue date, currency, grand total)")
    p.add_argument("--extraction", choices=["auto", "model"], default="auto",
                   help="with --gold: auto reads embedded e-invoice XML as `pipeline run` does; model scores the "
                        "model on every document")
    p.add_argument("--split", choices=["all", "dev", "holdout"], default="all",
                   help="with --gold: every document, the development slice, or the held-out slice (every 4th "
                        "in name order)")
    p.add_argument("--text-cache", default=None, metavar="DIR",
                   help="with --gold: keep OCR's page texts here (per file and OCR settings) for repeated runs")
    p.add_argument("--backend", choices=["engine", "hf"], default="engine",
                   help="engine (constrained, default) or hf (transformers greedy, unconstrained reference)")
    p.add_argument("--compare-to", default=None, metavar="REPORT_JSON",
                   help="an earlier --json report: print the accuracy delta and the share of identical outputs")
    p.add_argument("--no-grounding", action="store_true",
                   help="decode date, amount and account from the plain schema patterns instead of the values each"
                        " document prints (measures the model alone; `pipeline run` always grounds)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_eval)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pipeline")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
