"""End-to-end pipeline: exact reconciliation, idempotent re-runs, --force, resume after SIGKILL,
and schema validity of every output row (fake engine for speed, the real engine on a tiny model)."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.config import RunConfig
from pipeline.output.sink import read_dataset
from pipeline.run import Stages, run_pipeline, write_run
from schemas import AccountWindowSummary, DocumentExtraction
from tests.helpers.fake_llm import BAD_MARKER, FakeLLM
from tests.helpers.pipeline_inputs import make_pdf, write_sample_inputs

REPO = Path(__file__).resolve().parents[1]
DATASETS = ("documents", "account_windows", "transactions", "errors")


@pytest.fixture()
def inputs(tmp_path: Path) -> Path:
    root = tmp_path / "in"
    write_sample_inputs(root)
    make_pdf(root / "docs" / "bad_answer.pdf", [f"Invoice {BAD_MARKER} total 5.00 EUR"])
    return root


def _cfg(inputs: Path, out: Path, model: Path, date: str = "2024-05-01", **kw: object) -> RunConfig:
    return RunConfig(input_dir=inputs, output_dir=out, model_dir=model, run_date=date, progress=False, **kw)


def _snapshot(out: Path) -> dict[str, list[dict]]:
    return {ds: sorted(read_dataset(out, ds).to_pylist(), key=lambda r: r["row_id"]) for ds in DATASETS}


def _model_fields(row: dict, model: type) -> dict:
    return {k: row[k] for k in model.model_fields}


def test_every_input_file_and_row_is_accounted_for_exactly_once(inputs: Path, fake_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = run_pipeline(_cfg(inputs, out, fake_model), llm=FakeLLM())
    snap = _snapshot(out)
    docs, wins, txs, errs = (snap[d] for d in DATASETS)
    rec = summary.reconciliation
    assert rec["balanced"] and rec["files"] == rec["files_accounted"] == 9

    # documents: each readable PDF is one output row or one error row, never both
    pdfs = sorted(str(p.relative_to(inputs)) for p in inputs.rglob("*.pdf"))
    doc_err = [e for e in errs if e["unit"] == "document"]
    assert sorted([d["source_file"] for d in docs] + [e["source_file"] for e in doc_err]) == pdfs
    assert {e["source_file"]: e["error_class"] for e in doc_err} == {
        "docs/scan.pdf": "NeedsOCR", "docs/broken.pdf": "UnreadablePDF", "docs/bad_answer.pdf": "SchemaValidation"}

    # transaction rows: (file, line) of every data row appears once, as a transaction or a row error
    expected = {("logs/de_bank.csv", n) for n in range(2, 6)} | {("logs/us_card.jsonl", n) for n in (1, 2, 3)}
    got = [(t["source_file"], t["source_row"]) for t in txs] + [
        (e["source_file"], e["source_row"]) for e in errs if e["unit"] == "row"]
    assert sorted(got) == sorted(expected) and len(got) == len(set(got))

    # windows account for every good transaction exactly once
    assert sum(w["tx_count"] for w in wins) == len(txs) == rec["transaction_rows_output"]
    assert all(w["source_file"] for w in wins)

    # the remaining file is the unsupported one
    assert [e["source_file"] for e in errs if e["unit"] == "file"] == ["notes.rtf"]
    assert summary.manifest["outputs"] == {"documents": len(docs), "account_windows": len(wins),
                                           "transactions": len(txs), "filing_facts": 0, "filing_sections": 0,
                                           "errors": len(errs)}


def test_rerun_is_identical_and_force_never_duplicates(inputs: Path, fake_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_pipeline(_cfg(inputs, out, fake_model), llm=FakeLLM())
    first = _snapshot(out)
    llm = FakeLLM()
    again = run_pipeline(_cfg(inputs, out, fake_model), llm=llm)
    assert _snapshot(out) == first
    assert again.reconciliation["documents_skipped"] == len(first["documents"])
    assert llm.calls.count(0) == 0 and sum(llm.calls) == 1  # only the failed document is retried
    run_pipeline(_cfg(inputs, out, fake_model, force=True), llm=FakeLLM())
    assert _snapshot(out) == first


def test_new_run_date_skips_done_units_without_duplicating(inputs: Path, fake_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_pipeline(_cfg(inputs, out, fake_model), llm=FakeLLM())
    first = _snapshot(out)
    run_pipeline(_cfg(inputs, out, fake_model, date="2024-05-02"), llm=FakeLLM())
    second = _snapshot(out)
    for ds in DATASETS:
        ids = [r["row_id"] for r in second[ds]]
        assert len(ids) == len(set(ids)) and set(ids) == {r["row_id"] for r in first[ds]}
    assert {r["run_date"] for r in second["documents"]} == {"2024-05-01"}


def test_force_for_one_date_leaves_other_dates_partitions_alone(inputs: Path, fake_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_pipeline(_cfg(inputs, out, fake_model), llm=FakeLLM())
    first = _snapshot(out)
    files = {p.relative_to(out): p.stat().st_mtime_ns for p in out.glob("*/run_date=2024-05-01/*")}
    run_pipeline(_cfg(inputs, out, fake_model, date="2024-05-02", force=True), llm=FakeLLM())
    second = _snapshot(out)
    assert {p.relative_to(out): p.stat().st_mtime_ns for p in out.glob("*/run_date=2024-05-01/*")} == files
    for ds in DATASETS:
        old = [{**r, "run_date": None} for r in second[ds] if r["run_date"] == "2024-05-01"]
        new = [{**r, "run_date": None} for r in second[ds] if r["run_date"] == "2024-05-02"]
        assert old == [{**r, "run_date": None} for r in first[ds]]
        if ds == "account_windows":  # one row per account-month: the window stays under the date that has it
            assert old and not new
        else:
            assert sorted(r["row_id"] for r in new) == sorted(r["row_id"] for r in old)


@pytest.mark.parametrize(("change", "redone"), [
    ({"max_tokens_document": 96}, {"documents"}),
    ({"max_tokens_window": 96}, {"account_windows"}),
    ({"engine": {"dtype": "float32"}}, {"documents", "account_windows"}),
    ({"engine": {"max_model_len": 1024}}, {"documents", "account_windows"}),
    ("pipeline.ingest.pdf_text.TEXT_VERSION", {"documents"}),
    ("pipeline.grounding.GROUNDING_VERSION", {"documents", "account_windows"}),  # windows are grounded too (v2.4)
    ("pipeline.ingest.transactions.PARSER_VERSION", {"account_windows", "transactions"}),
], ids=["max_tokens_document", "max_tokens_window", "dtype", "max_model_len", "pdf-text-version",
        "grounding-version", "transaction-parser-version"])
def test_every_output_changing_setting_is_part_of_row_ids(inputs: Path, fake_model: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, change: object,
                                                          redone: set[str]) -> None:
    """A re-run with a setting that can change answers re-does exactly the rows it affects, and its rows replace
    the older ones of the same files (one row per file and record: the latest wins)."""
    out = tmp_path / "out"
    run_pipeline(_cfg(inputs, out, fake_model), llm=FakeLLM())
    before = {ds: {r["row_id"] for r in rows} for ds, rows in _snapshot(out).items()}
    kw: dict = {}
    if isinstance(change, str):
        monkeypatch.setattr(change, "changed-for-test")
    else:
        kw = dict(change)  # type: ignore[call-overload]
    again = run_pipeline(_cfg(inputs, out, fake_model, **kw), llm=FakeLLM())
    after = {ds: {r["row_id"] for r in rows} for ds, rows in _snapshot(out).items()}
    for ds in ("documents", "account_windows", "transactions"):
        if ds in redone:
            assert before[ds] and not after[ds] & before[ds] and len(after[ds]) == len(before[ds]), ds
        else:
            assert after[ds] == before[ds], ds
    assert again.reconciliation["balanced"]


def test_model_or_prompt_identity_is_part_of_row_ids(inputs: Path, fake_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_pipeline(_cfg(inputs, out, fake_model), llm=FakeLLM())
    (fake_model / "config.json").write_text('{"changed": true}')
    run_pipeline(_cfg(inputs, out, fake_model), llm=FakeLLM())
    docs = read_dataset(out, "documents").to_pylist()
    assert len({d["model_id"] for d in docs}) == 1 and len(docs) == 3  # the latest model's rows replaced the others
    (fake_model / "config.json").write_text('{"changed": 2}')
    run_pipeline(_cfg(inputs, out, fake_model, keep_history=True), llm=FakeLLM())
    docs = read_dataset(out, "documents").to_pylist()
    assert len({d["model_id"] for d in docs}) == 2 and len(docs) == 2 * 3  # --keep-history keeps every version


def test_output_changing_engine_options_are_part_of_the_model_identity(fake_model: Path) -> None:
    from pipeline.cli import build_parser
    from pipeline.config import EngineOptions
    from pipeline.models import model_identity

    base = model_identity(fake_model)
    ids = {base, model_identity(fake_model, "int8"), model_identity(fake_model, None, "int8"),
           model_identity(fake_model, "int8", "int8")}
    assert len(ids) == 4 and model_identity(fake_model, "int8", "int8").endswith("+int8+kv-int8")
    args = build_parser().parse_args(["run", "--input", "x", "--kv-cache-dtype", "int8"])
    assert args.kv_cache_dtype == "int8" and EngineOptions(kv_cache_dtype="int8").kv_cache_dtype == "int8"


# ---------------------------------------------------------------- real engine, tiny random model

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.helpers.checkpoints import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("m") / "tiny", "llama", max_position_embeddings=1024)


def _validates(out: Path) -> int:
    n = 0
    for row in read_dataset(out, "documents").to_pylist():
        DocumentExtraction.model_validate(_model_fields(row, DocumentExtraction))
        n += 1
    for row in read_dataset(out, "account_windows").to_pylist():
        AccountWindowSummary.model_validate(_model_fields(row, AccountWindowSummary))
        n += 1
    return n


def test_real_engine_run_is_reconciled_and_schema_valid(inputs: Path, tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = run_pipeline(_cfg(inputs, out, tiny_model, max_tokens_document=48, max_tokens_window=48))
    assert summary.reconciliation["balanced"]
    _validates(out)  # 100% of output rows validate (failures are error rows, never rows)
    errs = read_dataset(out, "errors").to_pylist()
    assert all(e["source_file"] for e in errs)



def test_real_engine_rows_carry_field_logprobs(tiny_model: Path, tmp_path: Path) -> None:
    inp = tmp_path / "in"
    make_pdf(inp / "inv.pdf", ["Invoice INV-7 from Example Supplies GmbH\nDate 2024-03-01\nTotal 100.50 EUR"])
    out = tmp_path / "out"
    run_pipeline(_cfg(inp, out, tiny_model, max_tokens_document=600))
    docs = read_dataset(out, "documents").to_pylist()
    assert len(docs) == 1, read_dataset(out, "errors").to_pylist()
    for d in docs:  # every value the model emitted has its log-probability; null fields have none
        lps = d["field_logprobs"]
        assert d["extraction_method"] == "model"
        assert set(lps) == set(DocumentExtraction.model_fields)
        assert all((lps[k] is not None and lps[k] <= 0.0) or d[k] is None for k in lps)
        assert lps["doc_type"] is not None


_CHILD = """
import sys
from pathlib import Path
from pipeline.config import RunConfig
from pipeline.run import run_pipeline
inp, out, model = map(Path, sys.argv[1:4])
run_pipeline(RunConfig(input_dir=inp, output_dir=out, model_dir=model, run_date="2024-05-01", progress=False,
                       bucket_size=1, max_tokens_document=48, max_tokens_window=48))
"""


def _run_child(inp: Path, out: Path, model: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(inp), str(out), str(model)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_sigkill_mid_run_then_rerun_equals_uninterrupted_run(tmp_path: Path, tiny_model: Path) -> None:
    inp = tmp_path / "in"
    write_sample_inputs(inp, n_pdfs=8)
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    proc = _run_child(inp, ref, tiny_model)
    assert proc.wait(timeout=600) == 0, proc.stderr.read().decode() if proc.stderr else ""

    proc = _run_child(inp, killed, tiny_model)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if any((killed / "_staging").glob("*/done/document-*")):
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not list(killed.glob("documents/*/*.parquet")), "nothing is published before the run commits"
    staged_done = list((killed / "_staging").glob("*/done/document-*"))
    assert staged_done

    cfg = RunConfig(input_dir=inp, output_dir=killed, model_dir=tiny_model, run_date="2024-05-01", progress=False,
                    bucket_size=1, max_tokens_document=48, max_tokens_window=48)
    resumed = run_pipeline(cfg)
    assert resumed.manifest["inputs"]["buckets_resumed"] >= 1
    assert _snapshot(killed) == _snapshot(ref)
    assert not (killed / "_staging").exists() or not any((killed / "_staging").iterdir())


def test_ingest_tables_are_arrow(inputs: Path) -> None:
    from pipeline.ingest import ingest

    res = ingest(inputs)
    assert isinstance(res.documents, pa.Table) and isinstance(res.transactions, pa.Table)
    assert res.files.num_rows == 9 and set(res.files.column("kind").to_pylist()) == {"pdf", "transactions", "unsupported"}


def test_every_dataset_is_queryable_with_polars_and_duckdb(inputs: Path, fake_model: Path, tmp_path: Path) -> None:
    import duckdb
    import polars as pl

    out = tmp_path / "out"
    run_pipeline(_cfg(inputs, out, fake_model), llm=FakeLLM())
    for ds in DATASETS:
        df = pl.scan_parquet(str(out / ds / "**" / "*.parquet"), hive_partitioning=True).collect()
        n = duckdb.sql(f"select count(*) from read_parquet('{out}/{ds}/*/*.parquet', hive_partitioning=true)").fetchall()
        assert df.height == n[0][0] == read_dataset(out, ds).num_rows > 0, ds
        assert "run_date" in df.columns and df["row_id"].is_unique().all()
    wins = pl.scan_parquet(str(out / "account_windows" / "**" / "*.parquet"), hive_partitioning=True).collect()
    assert wins.schema["period_start"] == pl.Date and wins.schema["net"] == pl.Decimal(18, 2)


class _ClosingLLM(FakeLLM):
    """Records whether it was closed, and whether that happened before the run's publish."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_an_engine_the_run_loaded_is_closed_and_dropped_before_publishing(inputs: Path, tiny_model: Path,
                                                                          tmp_path: Path) -> None:
    # the engine's CPU allocator keeps freed memory: a large log's publish must not run beside a resident engine
    engines: list[weakref.ref] = []
    seen_at_write: list[tuple[bool, bool]] = []

    def load(*_a: object, **_k: object) -> _ClosingLLM:
        llm = _ClosingLLM()
        engines.append(weakref.ref(llm))
        return llm

    def write(staging, manifest):  # type: ignore[no-untyped-def]
        gc.collect()
        seen_at_write.extend((ref() is None, True) for ref in engines)
        return write_run(staging, manifest)

    # the tiny model's directory names the run (its tokenizer); the engine loaded is the stand-in
    summary = run_pipeline(_cfg(inputs, tmp_path / "out", tiny_model), stages=Stages(load_llm=load, write=write))
    assert summary.reconciliation["balanced"]
    assert len(engines) == 1 and seen_at_write == [(True, True)]  # gone (closed, unreferenced) before the publish

    passed = _ClosingLLM()  # an engine the caller passes in stays the caller's
    run_pipeline(_cfg(inputs, tmp_path / "out2", tiny_model), llm=passed)
    assert not passed.closed
    kept = _ClosingLLM()  # and so does one a loader keeps for later runs
    run_pipeline(_cfg(inputs, tmp_path / "out3", tiny_model),
                 stages=Stages(load_llm=lambda *a, **k: kept, release_engines=False))
    assert not kept.closed
