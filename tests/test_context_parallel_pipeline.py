"""The pipeline sends a document whose KV does not fit the engine's cache to the context-parallel engine
(`--context-parallel N`) instead of failing it, and its row equals the one a big-enough single engine gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.plan.bucketing import Bucket, WorkItem
from pipeline.config import EngineOptions, RunConfig
from pipeline.plan.routing import route_long
from pipeline.output.sink import read_dataset
from pipeline.run import run_pipeline
from pipeline.plan.work import WorkUnit
from tests.helpers.pipeline_inputs import make_pdf

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "models" / "finextract-3m"
KV_BYTES_PER_TOKEN = 2 * 4 * 4 * 32 * 4  # the demo model: K and V x 4 layers x 4 KV heads x 32 dims x float32
SMALL_KV = 800 * KV_BYTES_PER_TOKEN  # one engine holds 800 tokens: enough for short documents only


def _long_invoice() -> list[str]:
    # no date is labelled, so every line's date is one the model chooses among and stays in what it reads
    # (`pipeline.grounding.focus`): the prompt is long, not only the text
    lines = [f"Line {i:03d}: 2024-03-{i % 28 + 1:02d} consulting services, {i % 9 + 1} hours at 95.00 EUR"
             for i in range(30)]
    return ["INVOICE No. CP-2024-0042\nIssuer: Ringwood Analytics GmbH\n" + "\n".join(lines)
            + "\nTotal due: 4,275.00 EUR"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cp-in")
    make_pdf(root / "long_invoice.pdf", _long_invoice())
    make_pdf(root / "short_invoice.pdf", ["Invoice INV-7 from Acme Ltd, 2024-02-01, total 120.50 EUR"])
    return root


def _run(inputs: Path, out: Path, **engine: object):
    cfg = RunConfig(input_dir=inputs, output_dir=out, model_dir=DEMO, run_date="2024-05-01", progress=False,
                    engine=EngineOptions(dtype="float32", **engine))
    return run_pipeline(cfg)


def _documents(out: Path) -> dict[str, dict]:
    skip = {"latency_ms", "run_date", "field_logprobs"}
    return {r["source_file"]: {k: v for k, v in r.items() if k not in skip}
            for r in read_dataset(out, "documents").to_pylist()}


def test_a_document_too_long_for_the_cache_runs_on_the_context_parallel_engine(inputs: Path, tmp_path: Path):
    reference = _run(inputs, tmp_path / "big")  # the default cache holds everything
    cut = _run(inputs, tmp_path / "small", kv_cache_memory=SMALL_KV)
    routed = _run(inputs, tmp_path / "cp", kv_cache_memory=SMALL_KV, context_parallel_size=2)

    assert set(_documents(tmp_path / "big")) == {"long_invoice.pdf", "short_invoice.pdf"}
    assert not _documents(tmp_path / "big")["long_invoice.pdf"]["truncated"]
    # Without context parallelism the long document cannot run: an error row that says why.
    errors = read_dataset(tmp_path / "small", "errors").to_pylist()
    assert [e["source_file"] for e in errors] == ["long_invoice.pdf"]
    assert "KV" in errors[0]["message"]
    # With it, the long document went to the 2-rank engine and gives the single engine's row; the row says where.
    routed_rows, single_rows = _documents(tmp_path / "cp"), _documents(tmp_path / "big")
    assert routed_rows["long_invoice.pdf"]["route"] == "context_parallel"
    assert {r["route"] for r in single_rows.values()} == {"engine"}
    assert all(r["text_read_fraction"] == 1.0 for r in [*routed_rows.values(), *single_rows.values()])
    same = {"route"}
    assert [{k: v for k, v in r.items() if k not in same} for _, r in sorted(routed_rows.items())] == \
        [{k: v for k, v in r.items() if k not in same} for _, r in sorted(single_rows.items())]
    assert read_dataset(tmp_path / "cp", "errors").num_rows == 0
    stats = routed.manifest["engine_stats"]["context_parallel"]
    assert stats["requests"] == 1 and all(used > 0 for used in stats["kv_blocks_peak_used_by_rank"])
    assert routed.manifest["engine_config"]["context_parallel"]["context_parallel_size"] == 2
    for summary in (reference, cut, routed):
        assert summary.reconciliation["balanced"]


def _item(n_tokens: int, max_tokens: int = 10, name: str = "x") -> WorkItem:
    return WorkItem(WorkUnit(row_id=name, kind="document", source_files=[f"{name}.pdf"]), list(range(n_tokens)),
                    max_tokens)


def test_routing_moves_only_what_does_not_fit_and_keeps_bucket_ids():
    a, b, c, d = _item(50, name="a"), _item(95, name="b"), _item(91, name="c"), _item(200, name="d")
    buckets = [Bucket("document-00000", "document", [a, b]), Bucket("document-00001", "document", [c, d])]
    ordinary, long = route_long(buckets, capacity_tokens=100, bucket_size=1)
    assert [(x.bucket_id, [i.unit.row_id for i in x.items]) for x in ordinary] == [("document-00000", ["a"])]
    assert a.route == "engine" and {i.route for x in long for i in x.items} == {"context_parallel"}
    assert [(x.bucket_id, [i.unit.row_id for i in x.items]) for x in long] == [
        ("document-cp-00000", ["b"]), ("document-cp-00001", ["c"]), ("document-cp-00002", ["d"])]
