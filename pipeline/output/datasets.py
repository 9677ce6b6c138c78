"""Explicit Arrow schemas of the output datasets and the builders of their rows.

Model-output columns are derived from the pydantic models in `schemas/` (`arrow_schema_for`), so
a schema change there changes the Parquet schema here; provenance columns (row_id, source_file,
model_id, prompt_version, schema_version, token counts) are added around them. `run_date` is not
stored in the files: it is the hive partition key.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from functools import cache
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from pipeline.errors import ERROR_ARROW_SCHEMA, ErrorRecord
from pipeline.grounding import field_confidence, is_grounded
from pipeline.grounding.injection import INSTRUCTIONS_REMOVED
from pipeline.grounding.numbers import unsupported_numbers
from pipeline.grounding.provenance import SOURCE_TYPE, FieldSource, text_sources
from pipeline.grounding.schema import CHOICE_FIELDS as CONFIDENCE_FIELDS
from pipeline.grounding.schema import NEVER_CONFIDENT
from pipeline.identity import stable_id
from pipeline.infer.confidence import emitted_logprobs, field_logprobs
from pipeline.ingest import inline_xbrl, statement_tables
from pipeline.ingest.transactions import transaction_row_id
from pipeline.plan.prompts import WINDOW_FACT_LABELS
from pipeline.plan.windows import FACT_PRECISION, FACT_SCALE
from schemas import (
    FACT_ARROW_SCHEMA,
    TRANSACTION_ARROW_SCHEMA,
    AccountWindowSummary,
    DocumentExtraction,
    SectionSummary,
    arrow_schema_for,
    arrow_values,
)

DATASETS = ("documents", "account_windows", "transactions", "filing_facts", "filing_sections", "errors")
KIND_DATASET = {"document": "documents", "window": "account_windows", "section": "filing_sections"}

_RUN_FIELDS = [
    pa.field("model_id", pa.string(), nullable=False),
    pa.field("prompt_version", pa.string(), nullable=False),
    pa.field("schema_version", pa.string(), nullable=False),
]
_GEN_FIELDS = [
    pa.field("prompt_tokens", pa.int64(), nullable=False),
    pa.field("output_tokens", pa.int64(), nullable=False),
    pa.field("finish_reason", pa.string(), nullable=True),
]


def _fact_type(key: str) -> pa.DataType:
    if key.endswith("_count"):
        return pa.int64()
    if key in ("credits", "debits", "net"):

        return pa.decimal128(FACT_PRECISION, FACT_SCALE)
    if key.startswith("period_"):
        return pa.date32()
    return pa.string()


@cache
def documents_schema() -> pa.Schema:

    head = [
        pa.field("row_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("page_count", pa.int32(), nullable=False),
        pa.field("needs_ocr", pa.bool_(), nullable=False),
        pa.field("ocr_pages", pa.list_(pa.int32()), nullable=False),  # pages without a text layer
        pa.field("ocred_pages", pa.list_(pa.int32()), nullable=False),  # of those, the pages read by OCR
        pa.field("ocr_engine", pa.string()),
        pa.field("encrypted", pa.bool_(), nullable=False),
        pa.field("truncated", pa.bool_(), nullable=False),
        pa.field("text_read_fraction", pa.float64(), nullable=False),  # of the document's text, what was read
        # how it was read: "engine", "context_parallel" (its KV did not fit one engine), "embedded_xml", or
        # "sections" (a filing read whole, section by section: the filing_sections dataset)
        pa.field("route", pa.string(), nullable=False),
        pa.field("form_type", pa.string()),  # 10-K, 10-Q, 8-K, prospectus, annual_report; null: not a filing
        pa.field("sections_read", pa.int32()),  # a filing's sections summarised, of sections_total
        pa.field("sections_total", pa.int32()),
        pa.field("prompt_tokens_full", pa.int64(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("author", pa.string()),
        pa.field("creator", pa.string()),
        pa.field("producer", pa.string()),
        pa.field("creation_date", pa.string()),
    ]
    trust = [
        # "embedded_xml": read from the PDF's e-invoice XML (pipeline.ingest.einvoice); "model": the extraction model's.
        pa.field("extraction_method", pa.string(), nullable=False),
        # Every value the row holds was taken from where the document labels it (pipeline.grounding.is_grounded).
        pa.field("grounded", pa.bool_(), nullable=False),
        # Per scored field: the value is the one candidate its labelled place left (or the e-invoice XML's), so it
        # needed no choice; the README states how often such fields were right on the real corpora.
        pa.field("field_confident", pa.struct([pa.field(n, pa.bool_()) for n in CONFIDENCE_FIELDS])),
        # A field the pipeline can verify is not confident: a person should look at this row (the issuer, a model
        # choice never marked confident, does not count: pipeline.grounding.schema.NEVER_CONFIDENT).
        pa.field("needs_review", pa.bool_(), nullable=False),
        # The model's log-probability of each emitted value (pipeline.infer.confidence); null for embedded_xml rows.
        pa.field("field_logprobs", pa.struct([pa.field(n, pa.float64()) for n in DocumentExtraction.model_fields])),
        # Where each value was printed: page, character span of that page's text and the characters there, or the
        # e-invoice XML element (pipeline.grounding.provenance); a value the text does not print has none.
        pa.field("field_sources", pa.list_(SOURCE_TYPE), nullable=False),
    ]
    return pa.schema(head + list(arrow_schema_for(DocumentExtraction)) + trust + _GEN_FIELDS + _RUN_FIELDS)


@cache
def filing_sections_schema() -> pa.Schema:
    """One row per section of a filing read whole: where it is and what the model says it says."""
    head = [
        pa.field("row_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("source_file", pa.string(), nullable=False),
        pa.field("filing_row_id", pa.string(), nullable=False),  # the filing's documents row
        pa.field("section_index", pa.int32(), nullable=False),
        pa.field("title", pa.string()),  # the heading it falls under, as printed
        pa.field("item", pa.string()),  # the form's item ("1A", "7"), where the section is one
        pa.field("page_start", pa.int32(), nullable=False),
        pa.field("page_end", pa.int32(), nullable=False),
        pa.field("char_start", pa.int64(), nullable=False),  # offsets into the document's text
        pa.field("char_end", pa.int64(), nullable=False),
        pa.field("chars_read", pa.int64(), nullable=False),  # of those, the characters the model was shown
    ]
    checks = [
        pa.field("unsupported_numbers", pa.list_(pa.string()), nullable=False),  # numbers the section never prints
        pa.field("grounded", pa.bool_(), nullable=False),  # no unsupported number, and the whole section read
    ]
    return pa.schema(head + list(arrow_schema_for(SectionSummary)) + checks + _GEN_FIELDS + _RUN_FIELDS)


@cache
def account_windows_schema() -> pa.Schema:

    head = [pa.field("row_id", pa.string(), nullable=False)]
    head += [pa.field(k, _fact_type(k), nullable=k not in ("account", "period_start")) for k, _ in WINDOW_FACT_LABELS]
    head += [
        pa.field("source_file", pa.string(), nullable=False),  # '; '-joined when a window spans files
        pa.field("source_files", pa.list_(pa.string()), nullable=False),
        pa.field("tx_fingerprint", pa.string(), nullable=False),
    ]
    return pa.schema(head + list(arrow_schema_for(AccountWindowSummary)) + _GEN_FIELDS + _RUN_FIELDS)


@cache
def transactions_schema() -> pa.Schema:

    head = [pa.field("row_id", pa.string(), nullable=False), pa.field("file_sha256", pa.string(), nullable=False)]
    return pa.schema(head + list(TRANSACTION_ARROW_SCHEMA) + [pa.field("schema_version", pa.string(), nullable=False)])


@cache
def filing_facts_schema() -> pa.Schema:
    """One row per fact of a filing (long format): concept, period, dimensions, value in full units, unit, page."""
    head = [pa.field("row_id", pa.string(), nullable=False)]
    return pa.schema(head + list(FACT_ARROW_SCHEMA) + [pa.field("schema_version", pa.string(), nullable=False)])


@cache
def errors_schema() -> pa.Schema:
    return pa.schema(list(ERROR_ARROW_SCHEMA) + _RUN_FIELDS)


def dataset_schema(name: str) -> pa.Schema:
    return {"documents": documents_schema, "account_windows": account_windows_schema,
            "transactions": transactions_schema, "filing_facts": filing_facts_schema,
            "filing_sections": filing_sections_schema, "errors": errors_schema}[name]()


def _fact_value(key: str, value: Any) -> Any:
    t = _fact_type(key)
    if value is None:
        return None
    if pa.types.is_decimal(t):
        return Decimal(str(value)).quantize(Decimal("0.01"))
    if pa.types.is_date(t):
        return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value)[:10])
    if pa.types.is_integer(t):
        return int(value)
    return str(value)


def output_row(item: Any, result: BaseModel, out: Any, run: dict[str, str], tokenizer: Any = None) -> dict[str, Any]:
    """One documents/account_windows row from a WorkItem, its validated model and the engine's answer (a
    CompletionOutput; `tokenizer`: the engine's, to place each output token's log-probability in the field it
    spells)."""
    unit = item.unit
    row: dict[str, Any] = {"row_id": unit.row_id, "source_file": unit.source_file}
    fields = result.model_dump(mode="json")
    if unit.kind == "document":

        row.update(unit.context)

        logprobs = field_logprobs(out.text, list(out.token_ids), emitted_logprobs(out), tokenizer,
                                  tuple(fields)) if tokenizer is not None else None
        row.update(truncated=item.truncated, text_read_fraction=item.text_read_fraction, route=item.route,
                   prompt_tokens_full=item.original_tokens, extraction_method="model",
                   grounded=is_grounded(fields, item.visible_text), field_logprobs=logprobs)
        confident = field_confidence(fields, item.visible_text, ocr=bool(unit.context.get("ocred_pages")))
        row.update(field_sources=[s.as_row() for s in text_sources(fields, item.visible_text)])
        row.update(field_confident=confident, needs_review=bool(unit.context.get(INSTRUCTIONS_REMOVED)) or not all(
            v for k, v in confident.items() if k not in NEVER_CONFIDENT))
    elif unit.kind == "section":
        row.update({k: v for k, v in unit.context.items() if k in filing_sections_schema().names})
        fields["key_points"] = list(dict.fromkeys(fields["key_points"]))  # an item chosen twice is one point
        shown = item.visible_text
        unsupported = unsupported_numbers([fields["summary"], *fields["key_points"]], shown)
        row.update(chars_read=len(shown), unsupported_numbers=unsupported,
                   grounded=not unsupported and not item.truncated)
    else:
        row.update({k: _fact_value(k, v) for k, v in unit.facts.items()})
        row.update(source_files=list(unit.source_files), tx_fingerprint=unit.context["tx_fingerprint"])
    row.update(arrow_values(type(result), fields))  # dates and amounts typed as the dataset stores them
    row.update(prompt_tokens=item.n_tokens, output_tokens=len(out.token_ids), finish_reason=out.finish_reason)
    row.update(run)
    return row


def einvoice_row(unit: Any, run: dict[str, str]) -> dict[str, Any]:
    """A documents row read from the unit's embedded e-invoice XML (no prompt, no generation)."""
    row: dict[str, Any] = {"row_id": unit.row_id, "source_file": unit.source_file, **unit.context}
    row.update(truncated=False, text_read_fraction=1.0, route="embedded_xml", prompt_tokens_full=0,
               extraction_method="embedded_xml", grounded=True,
               field_logprobs=None, field_confident={n: True for n in CONFIDENCE_FIELDS}, needs_review=False,
               field_sources=[FieldSource(n, xml_path=p).as_row() for n, p in (unit.extracted_paths or {}).items()])
    row.update(arrow_values(DocumentExtraction, unit.extracted))
    row.update(prompt_tokens=0, output_tokens=0, finish_reason=None)
    row.update(run)
    return row


def error_rows(errors: list[ErrorRecord], run: dict[str, str]) -> pa.Table:
    rows = [{**{n: getattr(e, n) for n in ERROR_ARROW_SCHEMA.names}, **run} for e in errors]
    return pa.Table.from_pylist(rows, schema=errors_schema())


FACT_READERS = {"xbrl": inline_xbrl.PARSER_VERSION, "table": statement_tables.PARSER_VERSION}  # method -> version


def filing_fact_rows(facts: pa.Table, schema_version: str) -> pa.Table:
    """The facts with their row identity: the document, the fact (concept, context, unit) and the reader."""
    ids = [stable_id("fact", d, c, x, u, FACT_READERS[m]) for d, c, x, u, m in zip(
        *(facts.column(n).to_pylist() for n in ("doc_id", "concept", "context", "unit", "method")))]
    cols = [pa.array(ids, pa.string()), *(facts.column(n) for n in FACT_ARROW_SCHEMA.names),
            pa.array([schema_version] * facts.num_rows, pa.string())]
    return pa.Table.from_arrays(cols, schema=filing_facts_schema())


def transaction_rows(transactions: pa.Table, file_sha: dict[str, str], schema_version: str) -> pa.Table:

    files = transactions.column("source_file").to_pylist()
    rows = transactions.column("source_row").to_pylist()
    shas = [file_sha[f] for f in files]
    ids = [transaction_row_id(s, r) for s, r in zip(shas, rows)]
    schema = transactions_schema()
    cols = [pa.array(ids, pa.string()), pa.array(shas, pa.string())]
    cols += [transactions.column(n) for n in transactions.column_names]
    cols.append(pa.array([schema_version] * transactions.num_rows, pa.string()))
    return pa.Table.from_arrays(cols, schema=schema)
