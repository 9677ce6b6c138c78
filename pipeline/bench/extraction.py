"""`pipeline bench --workload extraction`: the engine on real extraction requests, with and without speculation.

The standard workload's random tokens never repeat, so prompt lookup finds nothing there and speculation can
only be shown not to hurt. Here the requests are the eval set's (the default model over `data/eval`, or a real
gold set such as the shared invoices), decoded under their grounded JSON schemas exactly as `pipeline eval` and
`pipeline run` do: the output copies the document's spans and the grammar forces its keys. Each configuration
runs the same requests in one process; the report gives acceptance, engine steps saved, throughput against the
run without speculation, and accuracy with identical-output share (greedy: they must not change).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from pipeline.bench.runner import speculation_summary


def run_extraction_bench(model: str | None, speculative: list[dict[str, Any]], out_dir: Path,
                         limit: int | None = None, eval_dir: str | None = None, gold_dir: str | None = None,
                         progress: bool = True) -> dict[str, Any]:
    """One eval run without speculation, then one per speculative_config; results.json-style dict."""
    from pipeline.evaluate import compare_reports, run_eval  # noqa: PLC0415 - heavy imports only when used

    runs: list[dict[str, Any]] = []
    base = run_eval(model, limit=limit, eval_dir=eval_dir, gold_dir=gold_dir, progress=progress)
    runs.append(_row("engine default (no speculation)", None, base))
    for spec in speculative:
        report = run_eval(model, limit=limit, eval_dir=eval_dir, gold_dir=gold_dir, progress=progress,
                          speculative=spec)
        row = _row(f"+ speculative ({spec['method']})", spec, report)
        cmp = compare_reports(report, base)
        row["accuracy_delta_points"] = cmp["accuracy_delta_points"]
        row["identical_outputs_share"] = cmp["identical_share"]
        row["speculative_summary"] = speculation_summary(
            report["engine_stats"], report["generate_seconds"], report["engine_stats"]["output_tokens"],
            base["engine_stats"], base["generate_seconds"], base["engine_stats"]["output_tokens"])
        runs.append(row)
    results = {
        "workload": "extraction", "model_dir": base["model_dir"], "gold_set": base["gold_set"],
        "eval_dir": base["eval_dir"], "n_documents": base["n_documents"], "n_windows": base["n_windows"],
        "engine": base.get("engine"), "runs": runs,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "extraction.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return results


def _row(label: str, spec: dict[str, Any] | None, report: dict[str, Any]) -> dict[str, Any]:
    stats = report["engine_stats"]
    wall = report["generate_seconds"]
    return {
        "label": label, "speculative_config": spec, "generate_s": wall,
        "output_tokens": stats["output_tokens"], "steps": stats["steps"],
        "output_tokens_per_s": stats["output_tokens"] / wall if wall else None,
        "overall_accuracy": report["overall_accuracy"], "schema_validity": report["schema_validity"],
        "engine_stats": stats,
    }


def render_extraction(results: dict[str, Any], console: Console) -> None:
    t = Table(title=f"pipeline bench --workload extraction: {results['model_dir']} over {results['eval_dir']} "
                    f"({results['n_documents']} documents, {results['n_windows']} windows)")
    for col in ("configuration", "generate s", "out tok/s", "steps", "accepted / drafted", "mean accepted",
                "steps saved", "x throughput", "accuracy", "identical outputs"):
        t.add_column(col, justify="left" if col == "configuration" else "right")
    for r in results["runs"]:
        sp = r.get("speculative_summary")
        t.add_row(
            r["label"], f"{r['generate_s']:.1f}", f"{r['output_tokens_per_s']:.1f}", str(r["steps"]),
            f"{sp['accepted_tokens']} / {sp['draft_tokens']} ({sp['acceptance_rate']:.0%})" if sp else "-",
            f"{sp['mean_accepted_length']:.2f}" if sp else "-",
            f"{sp['steps_saved_share']:.0%}" if sp else "-",
            f"{sp['throughput_ratio']:.2f}x" if sp and sp["throughput_ratio"] else "-",
            f"{r['overall_accuracy']:.1%}" + (f" ({r['accuracy_delta_points']:+.2f})" if sp else ""),
            f"{r['identical_outputs_share']:.0%}" if sp else "-",
        )
    console.print(t)
