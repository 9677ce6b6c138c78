"""The real-workload bench's pieces: which files are inputs, how a run's documents score, where its time went."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.real import collect_inputs, link_inputs, score, time_split
from bench.real_chart import parts_of, write_real_chart

GOLD = {"doc_type": "invoice", "issuer": "ACME GmbH", "reference": "INV-7", "date": "2024-03-05", "currency": "EUR",
        "amount": 119.0}


def _folder(root: Path) -> Path:
    root.mkdir(parents=True)
    for name in ("a.pdf", "b.pdf", "log.csv", "c.json"):
        (root / name).write_bytes(b"%PDF-1.4\n" if name.endswith(".pdf") else b"x")
    (root / "a.json").write_text(json.dumps(GOLD))
    return root


def test_a_gold_json_is_the_expectation_of_its_pdf_not_an_input(tmp_path: Path) -> None:
    inputs = collect_inputs([_folder(tmp_path / "inv"), _folder(tmp_path / "other" / "inv")])
    assert [i.rel for i in inputs] == ["inv/a.pdf", "inv/b.pdf", "inv/c.json", "inv/log.csv",
                                       "inv_/a.pdf", "inv_/b.pdf", "inv_/c.json", "inv_/log.csv"]
    assert [i.rel for i in inputs if i.gold is not None] == ["inv/a.pdf", "inv_/a.pdf"]
    assert inputs[0].gold["amount"] == "119.00"
    linked = link_inputs(inputs, tmp_path / "in")
    assert sorted(p.relative_to(linked).as_posix() for p in linked.rglob("*") if p.is_file()) == sorted(
        i.rel for i in inputs)
    assert not any(p.is_symlink() for p in linked.rglob("*"))  # discovery never follows a symbolic link
    with pytest.raises(FileNotFoundError):
        collect_inputs([tmp_path / "missing"])


def test_documents_rows_score_against_the_gold_and_a_missing_row_scores_nothing(tmp_path: Path) -> None:
    inputs = collect_inputs([_folder(tmp_path / "inv"), _folder(tmp_path / "more")])
    schema = pa.schema([("source_file", pa.string()), ("doc_type", pa.string()), ("issuer", pa.string()),
                        ("reference", pa.string()), ("date", pa.date32()), ("currency", pa.string()),
                        ("amount", pa.decimal128(18, 2))])
    rows = [{"source_file": "inv/a.pdf", "doc_type": "invoice", "issuer": "ACME GmbH Berlin", "reference": "#INV-7",
             "date": dt.date(2024, 3, 5), "currency": "USD", "amount": Decimal("119.00")},
            {"source_file": "inv/b.pdf", "doc_type": "receipt", "issuer": None, "reference": None, "date": None,
             "currency": None, "amount": None}]
    part = tmp_path / "out" / "documents" / "run_date=2026-12-06" / "part-0.parquet"
    part.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), part)
    got = score(inputs, tmp_path / "out")
    # inv/a.pdf: all but the currency; more/a.pdf has no row (its error row): nothing right
    assert got["documents_scored"] == 2 and got["fields_scored"] == 12
    assert got["per_field"] == {"doc_type": 1, "issuer": 1, "reference": 1, "date": 1, "currency": 0, "amount": 1}
    assert got["fields_right"] == 5 and got["accuracy"] == pytest.approx(5 / 12)


def test_the_time_split_accounts_for_the_whole_wall_time() -> None:
    manifest = {"timings_s": {"ingest": 10.0, "ingest.hash": 0.5, "ingest.parse_documents": 2.0, "ingest.ocr": 6.0,
                              "plan": 0.2, "load_model": 4.0, "prepare": 1.0, "infer": 20.0, "total": 36.0},
                "engine_stats": {"prefill_step_s": 8.0, "decode_step_s": 10.0, "sample_s": 3.0}}
    split = time_split(manifest, wall_s=40.0)
    assert sum(split.values()) == pytest.approx(40.0, abs=0.05)
    assert split["ingest: ocr"] == 6.0 and split["ingest: other"] == 1.5
    assert split["infer: sampling and grammar"] == 3.0
    assert split["infer: prefill steps (forward)"] + split["infer: decode steps (forward)"] == pytest.approx(15.0)
    assert split["infer: grounding, validation, staging"] == 2.0
    assert split["startup (imports, kernels, output checks)"] == 4.0
    assert split["infer: peer engine (prefill, decode, grammar)"] == 0.0
    # a peer's run (bench/llamacpp_server.py, bench/hf_peer.py) reports one span for its model work
    peer = {**manifest, "engine_stats": {"generate_s": 17.0}}
    split = time_split(peer, wall_s=40.0)
    assert sum(split.values()) == pytest.approx(40.0, abs=0.05)
    assert split["infer: peer engine (prefill, decode, grammar)"] == 17.0
    assert split["infer: grounding, validation, staging"] == 3.0


def test_the_charts_parts_hold_every_line_of_the_time_split_once() -> None:
    manifest = {"timings_s": {"ingest": 10.0, "ingest.hash": 0.5, "ingest.parse_documents": 2.0, "ingest.ocr": 6.0,
                              "plan": 0.2, "load_model": 4.0, "prepare": 1.0, "infer": 20.0, "total": 36.0},
                "engine_stats": {"prefill_step_s": 8.0, "decode_step_s": 10.0, "sample_s": 3.0}}
    for stats in (manifest["engine_stats"], {"generate_s": 17.0}):
        split = time_split({**manifest, "engine_stats": stats}, wall_s=40.0)
        parts = {name: seconds for name, _, seconds in parts_of(split)}
        assert sum(parts.values()) == pytest.approx(sum(split.values()))
        assert parts["OCR"] == 6.0 and parts["prompts, grounding, validation, staging"] == pytest.approx(
            1.0 + split["infer: grounding, validation, staging"])


def test_the_real_chart_draws_the_runs_that_ran(tmp_path: Path) -> None:
    split = {"ingest: ocr": 6.0, "infer: prefill steps (forward)": 5.0, "plan": 0.2}
    ran = {"label": "default", "time_split_s": split, "documents_per_hour": 100.0,
           "score": {"fields_right": 5, "fields_scored": 6}}
    failed = {"label": "broken", "exit_status": 1, "wall_s": 3.0}
    path = write_real_chart({"documents": 7, "runs": [ran, failed]}, tmp_path)
    assert path == tmp_path / "real.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert write_real_chart({"documents": 7, "runs": [failed]}, tmp_path / "none") is None


def test_latency_percentiles_skip_requests_without_a_span() -> None:
    from pipeline.output.manifest import latency_percentiles

    got = latency_percentiles([(0.1, None, 0.1), (0.3, 0.02, 1.0), (0.2, 0.04, 2.0)])
    assert got["ttft"]["p50"] == 0.2 and got["e2e"]["p50"] == 1.0
    assert got["tpot"] == {"p50": 0.03, "p95": 0.039, "p99": 0.0398}
    assert latency_percentiles([]) == {}


def test_the_inference_floor_is_the_runs_own_requests_at_the_measured_rates(tmp_path: Path) -> None:
    from bench.metrics import request_flops_split
    from bench.real import real_floor
    from pipeline.config import demo_model_dir

    part = tmp_path / "documents" / "run_date=2026-12-06" / "part-0.parquet"
    part.parent.mkdir(parents=True)
    pq.write_table(pa.table({"prompt_tokens": [100, 300, 50], "output_tokens": [20, 40, 0]}), part)
    manifest = {"engine_config": {"model_dir": str(demo_model_dir()), "dtype": "float32"},
                "engine_stats": {"prefill_step_s": 1.5, "decode_step_s": 2.5}}
    rates = {"dense_flops_per_s": 1e11, "int8_ops_per_s": 2e11, "read_bytes_per_s": 1e10}
    got = real_floor(tmp_path, manifest, rates)
    assert got["requests"] == 2  # a row without output (an e-invoice read from its XML) was no request
    from engine.models.checkpoint import open_checkpoint

    c = open_checkpoint(demo_model_dir()).config
    from bench.shapes import ModelShape

    shape = ModelShape("demo", c.family, c.hidden_size, c.num_layers, c.num_heads, c.num_kv_heads,
                       c.intermediate_size, c.vocab_size, c.head_dim, c.tie_word_embeddings, qkv_bias=c.qkv_bias)
    gemm = sum(request_flops_split(shape, p, o)[0] for p, o in ((100, 20), (300, 40)))
    assert got["gemm_flops"] == pytest.approx(gemm)
    assert got["compute_s"] == pytest.approx(gemm / 2e11 + got["attention_flops"] / 1e11)
    assert got["engine_step_s"] == 4.0 and got["x_floor"] == pytest.approx(4.0 / got["wall_s"])
