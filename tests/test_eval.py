"""`pipeline eval`: scoring rules and a small end-to-end smoke run on the shipped model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.evaluate import (
    DEMO_MODEL_DIR,
    MAX_FAILURES,
    EvalItem,
    Scores,
    compare_reports,
    register,
    run_eval,
)
from schemas import DocumentExtraction

GOLD = {"doc_type": "invoice", "issuer": "A", "counterparty": None, "reference": "R1", "date": "2024-01-02",
        "currency": "EUR", "amount": "1.00", "account": None}


def _item() -> EvalItem:
    return EvalItem("d1", "document", GOLD, DocumentExtraction)


def test_scores_count_fields_and_validity():
    s = Scores()
    s.add(_item(), json.dumps({**GOLD, "amount": "2.00"}, separators=(",", ":")))
    s.add(_item(), json.dumps(GOLD, separators=(",", ":")))
    s.add(_item(), '{"doc_type":"invoice"')  # truncated: invalid, every field counts as wrong
    r = s.report()
    assert r["fields"]["document.amount"] == {"accuracy": 1 / 3, "correct": 1, "total": 3}
    assert r["fields"]["document.issuer"]["correct"] == 2
    assert r["schema_validity"] == pytest.approx(2 / 3)
    assert r["overall_accuracy"] == pytest.approx((8 + 7) / 24)
    assert r["by_kind"]["document"]["exact_match"] == pytest.approx(1 / 3)
    assert [f["id"] for f in r["failures"]] == ["d1", "d1"]


def test_failures_beyond_the_reports_list_are_counted_not_dropped_in_silence():
    s = Scores()
    for _ in range(MAX_FAILURES + 7):
        s.add(_item(), json.dumps({**GOLD, "amount": "2.00"}, separators=(",", ":")))
    r = s.report()
    assert len(r["failures"]) == MAX_FAILURES and r["failures_left_off"] == 7


def test_compare_reports_counts_identical_outputs():
    base = {"model_dir": "m", "quantization": None, "overall_accuracy": 0.9, "outputs": {"a": "x", "b": "y", "c": "z"}}
    run = {"overall_accuracy": 0.885, "outputs": {"a": "x", "b": "Y", "c": "z", "d": "only here"}}
    c = compare_reports(run, base)
    assert (c["items_compared"], c["identical_outputs"]) == (3, 2)
    assert c["identical_share"] == pytest.approx(2 / 3)
    assert c["accuracy_delta_points"] == pytest.approx(-1.5)
    with pytest.raises(ValueError, match="no outputs in common"):
        compare_reports(run, {"overall_accuracy": 0.9, "outputs": {}})


def test_register_adds_eval_subcommand():
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["eval", "--limit", "3", "--quantization", "int8", "--json", "x.json"])
    assert (args.limit, args.quantization, args.json, args.backend) == (3, "int8", "x.json", "engine")
    assert args.no_grounding is False
    assert parser.parse_args(["eval", "--no-grounding"]).no_grounding is True


@pytest.mark.skipif(not (DEMO_MODEL_DIR / "model.safetensors").is_file(), reason="demo model not trained yet")
def test_eval_smoke(tmp_path: Path):
    out = tmp_path / "report.json"
    report = run_eval(DEMO_MODEL_DIR, limit=3, json_path=out)
    saved = json.loads(out.read_text())
    assert saved["overall_accuracy"] == report["overall_accuracy"]
    assert 0.0 <= report["overall_accuracy"] <= 1.0
    assert report["n_documents"] == 3 and report["n_windows"] == 3
    assert report["schema_validity"] == 1.0  # constrained decoding
    assert report["grounding"] is True  # as in `pipeline run`
    assert {"document.amount", "window.flags"} <= set(report["fields"])
    assert len(saved["outputs"]) == 6
    again = run_eval(DEMO_MODEL_DIR, limit=3, compare_to=out)  # greedy and seeded: the same outputs again
    assert again["comparison"]["identical_share"] == 1.0
    assert again["comparison"]["accuracy_delta_points"] == 0.0
    alone = run_eval(DEMO_MODEL_DIR, limit=3, grounding=False)
    assert alone["grounding"] is False and alone["schema_validity"] == 1.0
