"""Units of work: one extraction request per PDF document, one summary request per account window.

    run_identity(cfg, tokenizer) -> RunIdentity   once per run
    document_units(documents, identity) -> list[WorkUnit]
    window_units(transactions, file_sha, identity) -> list[WorkUnit]

A unit's `row_id` is deterministic: it hashes every input that can change the row (content, reader and
grounding versions, prompt, schema, model with adapter and quantization, dtype, token budget, context length),
so the already-done check and upserts key on it and a re-run with other settings never keeps stale rows. Window facts (counts, sums, flags' counts) come
from `pipeline.plan.windows.window_facts` (polars); the model only classifies and narrates them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import polars as pl
import pyarrow as pa

import schemas
from pipeline import grounding
from pipeline.config import RunConfig
from pipeline.grounding.injection import INSTRUCTIONS_REMOVED, remove_instructions
from pipeline.identity import RunIdentity, stable_id
from pipeline.ingest import einvoice, filing_cover, pdf_text
from pipeline.ingest.einvoice import read_einvoice
from pipeline.ingest.filing_cover import read_cover
from pipeline.ingest.transactions import transaction_row_id
from pipeline.models import model_identity, model_template_sha
from pipeline.plan import prompts
from pipeline.plan.prompts import chat_template_sha, encode_prompt
from pipeline.plan.sections import Section
from pipeline.plan.windows import (
    merge_partials,
    window_facts_from_partials,
    window_partials,
)
from pipeline.row_groups import row_group_batches

Kind = Literal["document", "window", "filing", "section"]
DOCUMENT_CONTEXT_FIELDS = ("doc_id", "page_count", "needs_ocr", "ocr_pages", "ocred_pages", "ocr_engine", "encrypted",
                           "title", "author", "creator", "producer", "creation_date")


# Versions are read from their modules at call time (`grounding.GROUNDING_VERSION`, not a copy bound at import):
# a row id always carries the version the running code has.


def prompt_version(template_sha: str | None = None) -> str:
    return prompts.prompt_version(template_sha)


def schema_version() -> str:
    return schemas.SCHEMA_VERSION


@dataclass
class WorkUnit:
    """One model request before tokenisation. `text` is the variable part of the prompt."""

    row_id: str
    kind: Kind
    source_files: list[str]
    text: str = ""  # document text (documents) ; unused for windows
    facts: dict[str, Any] = field(default_factory=dict)  # window facts (windows)
    context: dict[str, Any] = field(default_factory=dict)  # provenance copied to the output row
    n_rows: int = 1  # input rows this unit accounts for (transactions in a window)
    extracted: dict[str, Any] | None = None  # fields read without the model (an embedded e-invoice's XML)
    extracted_paths: dict[str, str] | None = None  # of those, the XML element each value was read from

    @property
    def source_file(self) -> str:
        return "; ".join(self.source_files)

    def prompt_ids(self, tokenizer: Any, text: str | None = None, focus: bool = True) -> list[int]:
        """The full prompt's token ids; `text` overrides the document text (truncation). A document's prompt shows
        the lines its candidates lie on (`pipeline.grounding.focus`), or with `focus=False` the text as it is."""

        if self.kind == "document":
            shown = self.text if text is None else text
            return encode_prompt(tokenizer, "document", text=grounding.focused_text(shown) if focus else shown)
        if self.kind == "section":
            return encode_prompt(tokenizer, "section", text=self.text if text is None else text,
                                 title=self.context.get("title_line"))
        if self.kind == "window":
            return encode_prompt(tokenizer, "window", facts=self.facts)
        raise ValueError(f"a {self.kind} unit is not a model request (its sections are)")


def output_settings(*, dtype: str, max_tokens: int, max_model_len: int | None, section_tokens: int | None = None) -> str:
    """The run options, besides model, prompt and schema, that can change a model's answer: compute dtype, the
    answer's token budget, the context length (None: the model's own limit, which its files fix) and, for a
    section, how much text a section holds (it decides where sections are cut)."""
    extra = () if section_tokens is None else (section_tokens,)
    return stable_id("settings", dtype, max_tokens, "model" if max_model_len is None else max_model_len, *extra,
                     length=12)


def run_identity(cfg: RunConfig, tokenizer: Any = None) -> RunIdentity:
    """The identity of a run of `cfg`, computed once; chat-style prompts name their template's hash, from
    `tokenizer` (a loaded engine's) or the model's files."""
    engine = cfg.engine
    template = chat_template_sha(tokenizer) if tokenizer is not None else model_template_sha(cfg.model_dir)
    return RunIdentity(
        model_id=model_identity(cfg.model_dir, engine.quantization, engine.kv_cache_dtype),
        prompt_version=prompt_version(template), schema_version=schema_version(),
        settings={kind: output_settings(dtype=engine.dtype, max_tokens=n, max_model_len=engine.max_model_len,
                                        section_tokens=cfg.section_tokens if kind == "section" else None)
                  for kind, n in cfg.max_tokens().items()})


def document_row_id(doc_id: str, identity: RunIdentity) -> str:
    """A model's row depends on the file, the text read from it, the prompt, the schema, the model, the run
    options that change answers (`output_settings`) and what grounding lets it answer."""
    return stable_id("document", doc_id, identity.prompt_version, identity.schema_version, identity.model_id,
                     grounding.GROUNDING_VERSION, pdf_text.TEXT_VERSION, identity.settings.get("document", ""))


def filing_row_id(doc_id: str, identity: RunIdentity) -> str:
    """A filing's documents row: its cover (read without the model) and how much of it the section summaries read,
    which depends on everything a section's row depends on."""
    return stable_id("filing", doc_id, filing_cover.COVER_VERSION, pdf_text.TEXT_VERSION, identity.prompt_version,
                     identity.schema_version, identity.model_id, identity.settings.get("section", ""))


def section_units(filing: WorkUnit, sections: list[Section]) -> list[WorkUnit]:
    """One summary request per section of a filing; a section's row id is the filing's plus its place."""
    units = []
    for s in sections:
        context = {"doc_id": filing.context["doc_id"], "filing_row_id": filing.row_id, "section_index": s.index,
                   "title": s.title or None, "item": s.item, "page_start": s.page_start, "page_end": s.page_end,
                   "char_start": s.start, "char_end": s.end, "title_line": s.title or filing.context["form_type"]}
        units.append(WorkUnit(row_id=stable_id("section", filing.row_id, s.index, s.start, s.end), kind="section",
                              source_files=filing.source_files, text=filing.text[s.start:s.end], context=context))
    return units


def einvoice_row_id(doc_id: str) -> str:
    """A row read from an embedded e-invoice depends on the file and the XML reader, not on any model."""
    return stable_id("document", doc_id, einvoice.PARSER_VERSION, schema_version())


def document_units(documents: pa.Table, identity: RunIdentity, extraction: str = "auto") -> list[WorkUnit]:
    """One unit per ingested PDF document (documents are already unique by content hash). With
    `extraction="auto"` a PDF carrying an e-invoice this reader understands is extracted from its XML
    (`pipeline.ingest.einvoice`); "model" sends every document to the model. A filing (its cover names a form:
    10-K, 10-Q, 8-K, a prospectus, an IFRS annual report) is a "filing" unit: read whole, section by section."""

    units = []
    for row in documents.to_pylist():
        context = {k: row.get(k) for k in DOCUMENT_CONTEXT_FIELDS}
        cover = read_cover(row["text"], row.get("title"))
        if cover is not None:
            context.update(form_type=cover.form_type, registrant=cover.registrant, period_end=cover.period_end,
                           file_number=cover.file_number)
            units.append(WorkUnit(row_id=filing_row_id(row["doc_id"], identity), kind="filing",
                                  source_files=[row["source_file"]], text=row["text"], context=context))
            continue
        xml = row.get("einvoice_xml")
        read = read_einvoice(xml) if extraction == "auto" and xml else None
        fields, paths = read if read else (None, None)
        row_id = einvoice_row_id(row["doc_id"]) if fields else document_row_id(row["doc_id"], identity)
        # what the model reads and its candidates come from: the text without instruction-like passages
        cleaned = remove_instructions(row["text"])
        if cleaned.removed:
            context[INSTRUCTIONS_REMOVED] = len(cleaned.removed)
        units.append(WorkUnit(row_id=row_id, kind="document", source_files=[row["source_file"]], text=cleaned.text,
                              context=context, extracted=fields, extracted_paths=paths))
    return units


_FRAME_COLUMNS = ("tx_id", "account", "timestamp", "amount", "currency", "counterparty", "description",
                  "source_file", "source_row")
_MERGE_PARTIALS = 32  # slices' partials kept before they are merged into one


def transaction_batches(transactions: pa.Table, file_sha: dict[str, str], spooled: Sequence[Any] = (),
                        earlier: Iterable[pl.DataFrame] = ()) -> Iterator[pl.DataFrame]:
    """Every transaction of a run, slice by slice, with its row id as `tx_id`: the in-memory rows, then the
    spool files of large logs (`pipeline.ingest.stream_log`) read batch by batch, never whole, then `earlier`:
    published rows of the same accounts from files this run did not read (already with `tx_id`)."""
    if transactions.num_rows:
        df = pl.from_arrow(transactions)
        ids = [transaction_row_id(file_sha[f], r) for f, r in zip(df["source_file"].to_list(),
                                                                  df["source_row"].to_list())]
        yield df.with_columns(pl.Series("tx_id", ids, dtype=pl.String)).select(_FRAME_COLUMNS)
    for s in spooled:
        for batch in row_group_batches(s.path):
            yield pl.from_arrow(pa.Table.from_batches([batch])).rename({"row_id": "tx_id"}).select(_FRAME_COLUMNS)
    for df in earlier:
        yield df.select(_FRAME_COLUMNS)


# a row id is 32 hex digits (pipeline.identity.stable_id), summed as four 32-bit words
_ID_WORDS = [pl.col("tx_id").str.slice(8 * k, 8).str.to_integer(base=16).cast(pl.UInt64).sum().alias(f"w{k}")
             for k in range(4)]


@dataclass
class _Member:
    """What a window holds, gathered slice by slice: its files, its row count and the sums of its row ids' words,
    an order-free fingerprint of the set that keeps nothing per row (sorting the ids held every id of a log in
    memory at once)."""

    source_files: set[str] = field(default_factory=set)
    n_rows: int = 0
    words: list[int] = field(default_factory=lambda: [0] * len(_ID_WORDS))

    def fingerprint(self) -> str:
        return stable_id("txset-sum", self.n_rows, *(w % 2**64 for w in self.words))


def window_units(transactions: pa.Table, file_sha: dict[str, str], identity: RunIdentity,
                 spooled: Sequence[Any] = (), earlier: Iterable[pl.DataFrame] = ()) -> list[WorkUnit]:
    """One unit per (account, month) window with the polars-computed facts the prompt states (`spooled`: the
    spool files of logs read in batches, aggregated batch by batch with the rest; `earlier`: the published rows
    of the same accounts from files this run did not read, so a window covers all its transactions)."""
    if transactions.num_rows == 0 and not spooled:
        return []
    partials, members = [], {}
    for df in transaction_batches(transactions, file_sha, spooled, earlier):
        partials.append(window_partials(df))
        if len(partials) >= _MERGE_PARTIALS:
            partials = [merge_partials(partials)]
        period = pl.col("timestamp").dt.truncate("1mo").dt.date().cast(pl.String).alias("period_start")
        slices = df.group_by("account", period).agg(pl.len().alias("n"), pl.col("source_file").unique(), *_ID_WORDS)
        for row in slices.iter_rows(named=True):
            m = members.setdefault((row["account"], row["period_start"]), _Member())
            m.source_files.update(row["source_file"])
            m.n_rows += row["n"]
            m.words = [w + row[f"w{k}"] for k, w in enumerate(m.words)]
    units = []
    for facts in window_facts_from_partials(pl.concat(partials)):
        key = (facts["account"], str(facts["period_start"]))
        m = members.get(key)
        if m is None:
            raise RuntimeError(f"window_facts returned a window with no transactions: {key}")
        fingerprint = m.fingerprint()
        row_id = stable_id("window", key[0], key[1], fingerprint, identity.prompt_version, identity.schema_version,
                           identity.model_id, identity.settings.get("window", ""), grounding.GROUNDING_VERSION)
        units.append(WorkUnit(row_id=row_id, kind="window", source_files=sorted(m.source_files), facts=dict(facts),
                              context={"tx_fingerprint": fingerprint}, n_rows=m.n_rows))
    return units
