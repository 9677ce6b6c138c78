"""`pipeline bench --workload extraction`: the engine on real extraction requests, with and without speculation.

The standard workload's random tokens never repeat, so prompt lookup finds nothing there and speculation can
only be shown not to hurt. Here the requests are the eval set's (the default model over `data/eval`, or a real
gold set such as the shared invoices), decoded under their grounded JSON schemas exactly as `pipeline eval` and
`pipeline run` do: the output copies the document's spans and the grammar forces its keys. Each configuration
is loaded once and runs the same requests, alternating, `repeat` times; the report gives acceptance, engine
steps saved, throughput against the run without speculation, and accuracy with identical-output share (greedy:
they must not change).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.engine_runner import stats_delta
from bench.runner import speculation_summary


def run_extraction_bench(model: str | None, speculative: list[dict[str, Any]], out_dir: Path,
                         limit: int | None = None, eval_dir: str | None = None, gold_dir: str | None = None,
                         repeat: int = 2, progress: bool = True) -> dict[str, Any]:
    """The engine without speculation and with each speculative_config, each loaded once and run `repeat` times
    in alternation over the same requests (the machine's noise hits both alike); the fastest run of each counts."""
    from eval.evaluate import compare_reports, eval_engine, run_eval  # noqa: PLC0415
    from pipeline.config import default_model_dir  # noqa: PLC0415 - heavy imports only when used
    from pipeline.models import resolve_model  # noqa: PLC0415

    model_dir = resolve_model(model) if model else default_model_dir()
    configs: list[dict[str, Any] | None] = [None, *speculative]
    engines = [eval_engine(model_dir, speculative=c) for c in configs]
    best: list[tuple[dict[str, Any], dict[str, Any]] | None] = [None] * len(configs)
    for _ in range(max(1, repeat)):
        for i, (cfg, llm) in enumerate(zip(configs, engines)):
            llm.reset_prefix_cache()  # every run prefills its documents from scratch
            before = dict(llm.stats())
            report = run_eval(model_dir, limit=limit, eval_dir=eval_dir, gold_dir=gold_dir, progress=progress,
                              speculative=cfg, llm=llm)
            delta = stats_delta(before, report["engine_stats"])
            if best[i] is None or report["generate_seconds"] < best[i][0]["generate_seconds"]:  # type: ignore[index]
                best[i] = (report, delta)
    (base, base_delta), runs = best[0], []  # type: ignore[misc]
    runs.append(_row("engine default (no speculation)", None, base, base_delta))
    for cfg, entry in zip(configs[1:], best[1:]):
        report, delta = entry  # type: ignore[misc]
        row = _row(f"+ speculative ({cfg['method']})", cfg, report, delta)
        cmp = compare_reports(report, base)
        row["accuracy_delta_points"] = cmp["accuracy_delta_points"]
        row["identical_outputs_share"] = cmp["identical_share"]
        row["speculative_summary"] = speculation_summary(
            delta, report["generate_seconds"], delta["output_tokens"],
            base_delta, base["generate_seconds"], base_delta["output_tokens"])
        runs.append(row)
    results = {
        "workload": "extraction", "model_dir": base["model_dir"], "gold_set": base["gold_set"],
        "eval_dir": base["eval_dir"], "n_documents": base["n_documents"], "n_windows": base["n_windows"],
        "repeat": repeat, "engine": base.get("engine"), "runs": runs,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "extraction.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return results


def _row(label: str, spec: dict[str, Any] | None, report: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    wall = report["generate_seconds"]
    return {
        "label": label, "speculative_config": spec, "generate_s": wall,
        "output_tokens": delta["output_tokens"], "steps": delta["steps"],
        "output_tokens_per_s": delta["output_tokens"] / wall if wall else None,
        "overall_accuracy": report["overall_accuracy"], "schema_validity": report["schema_validity"],
        "engine_stats_delta": delta,
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
