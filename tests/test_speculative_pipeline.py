"""Speculation through the pipeline's front doors: `pipeline run --speculative`, `pipeline eval --speculative`
and `pipeline bench --workload extraction` give the same outputs as without it (greedy decoding)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline import cli
from pipeline.config import demo_model_dir, speculative_config
from tests.helpers.pipeline_inputs import write_sample_inputs


def test_cli_values_become_engine_configs(tmp_path: Path) -> None:
    assert speculative_config(None) is None
    assert speculative_config("ngram") == {"method": "ngram"}
    assert speculative_config("ngram", 6) == {"method": "ngram", "num_speculative_tokens": 6}
    assert speculative_config(f"draft_model:{tmp_path}") == {"method": "draft_model", "model": str(tmp_path)}
    assert speculative_config('{"method": "ngram", "prompt_lookup_max": 3}')["prompt_lookup_max"] == 3
    for bad, why in (("medusa", "must be ngram"), ("{oops", "not valid JSON"), ("draft_model", "must be ngram"),
                     ('{"method": "ngram", "num_speculative_tokens": 0}', "invalid --speculative")):
        with pytest.raises(ValueError, match=why):
            speculative_config(bad)
    with pytest.raises(ValueError, match="needs --speculative"):
        speculative_config(None, 3)


def _rows(out: Path) -> dict[str, list[dict]]:
    return {name: pl.read_parquet(sorted(out.glob(f"{name}/**/*.parquet"))).sort("row_id").to_dicts()
            for name in ("documents", "transactions", "errors") if list(out.glob(f"{name}/**/*.parquet"))}


def test_pipeline_run_rows_identical_with_speculation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_sample_inputs(tmp_path / "in", n_pdfs=3)
    outs = {}
    for name, extra in (("plain", []), ("spec", ["--speculative", "ngram", "--num-speculative-tokens", "5"])):
        outs[name] = tmp_path / name
        rc = cli.main(["run", "--input", str(tmp_path / "in"), "--output", str(outs[name]),
                       "--model", str(demo_model_dir()), "--run-date", "2024-06-30", "--no-progress", *extra])
        assert rc == 0, capsys.readouterr().out
    plain, spec = _rows(outs["plain"]), _rows(outs["spec"])
    from pipeline.output.manifest import latest_manifest

    latency = latest_manifest(outs["plain"])["request_latency_s"]  # every request's spans, from the engine
    assert set(latency) == {"ttft", "tpot", "e2e"}
    for q in latency.values():
        assert 0 < q["p50"] <= q["p95"] <= q["p99"]
    assert latency["ttft"]["p50"] <= latency["e2e"]["p50"]
    assert plain.keys() == spec.keys() and plain["documents"]
    # Every row and value is identical; the model's log-probabilities of the emitted tokens agree to float32
    # rounding (a verify step computes a position in a different batch shape than a decode step).
    drop = {"field_logprobs"}
    strip = lambda rows: [{k: v for k, v in r.items() if k not in drop} for r in rows]  # noqa: E731
    for name in plain:
        assert strip(plain[name]) == strip(spec[name]), name
    for a, b in zip(plain["documents"], spec["documents"]):
        assert a["field_logprobs"].keys() == b["field_logprobs"].keys()
        for k, v in a["field_logprobs"].items():
            assert (v is None) == (b["field_logprobs"][k] is None) and (v is None or abs(v - b["field_logprobs"][k]) < 1e-4)
    assert cli.main(["run", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "bad"),
                     "--speculative", "medusa", "--no-progress"]) == 2


def test_eval_and_extraction_bench_report_the_same_outputs(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli import main as bench_main

    model = str(demo_model_dir())
    assert bench_main(["--workload", "extraction", "--model", model, "--limit", "4", "--out", str(tmp_path), "--repeat", "1",
                       "--speculative", "ngram"]) == 0
    results = json.loads((tmp_path / "extraction.json").read_text())
    base, spec = results["runs"]
    assert base["speculative_config"] is None and spec["speculative_config"] == {"method": "ngram"}
    assert spec["identical_outputs_share"] == 1.0 and spec["accuracy_delta_points"] == 0
    sp = spec["speculative_summary"]
    assert sp["accepted_tokens"] > 0 and sp["forced_tokens"] > 0 and spec["steps"] < base["steps"]
    assert sp["steps_saved_share"] == pytest.approx(1 - spec["steps"] / base["steps"])
    assert "x throughput" in capsys.readouterr().out

    from eval.evaluate import main as eval_main

    assert eval_main(["eval", "--model", model, "--limit", "4", "--speculative", "ngram", "--no-progress",
                      "--json", str(tmp_path / "e.json"), "--compare-to", str(tmp_path / "none.json")]) == 2
    assert eval_main(["eval", "--model", model, "--limit", "4", "--no-progress",
                      "--json", str(tmp_path / "none.json")]) == 0
    assert eval_main(["eval", "--model", model, "--limit", "4", "--speculative", "ngram", "--no-progress",
                      "--json", str(tmp_path / "e.json"), "--compare-to", str(tmp_path / "none.json")]) == 0
    report = json.loads((tmp_path / "e.json").read_text())
    assert report["comparison"]["identical_share"] == 1.0 and report["speculative"] == {"method": "ngram"}
    assert "speculative ngram:" in capsys.readouterr().out
